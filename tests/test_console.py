"""A quiet console (issue 32 item 5): library warnings go to a log file with one line saying
so, and long commands show progress."""

from __future__ import annotations

import logging
import warnings

from ragrouter import console


def test_library_warnings_go_to_the_log_file_with_one_line_on_the_console(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAGROUTER_HOME", str(tmp_path))
    said = []
    from sklearn.exceptions import ConvergenceWarning

    with console.library_warnings("routers train", echo=said.append) as path:
        warnings.warn("Stochastic Optimizer: Maximum iterations (200) reached", ConvergenceWarning)
        warnings.warn("Hint: Inferred schema contains integer column(s)", UserWarning)
        logging.getLogger("mlflow.models.model").warning("Model logged without a signature")
        logging.getLogger("ragrouter.stages").warning("ours: meant for the user")
    err = capsys.readouterr().err
    assert "Maximum iterations" not in err and "Inferred schema" not in err and "without a signature" not in err
    text = path.read_text()
    assert path == tmp_path / "logs" / "warnings.log"
    assert "[routers train] ConvergenceWarning: Stochastic Optimizer" in text
    assert "UserWarning: Hint: Inferred schema" in text and "mlflow.models.model WARNING: Model logged" in text
    assert "ours: meant for the user" not in text  # our own loggers are not hidden
    assert said == [f"(3 library warnings written to {path})"]
    # outside the context, warnings behave as before
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("after", UserWarning)
    assert [str(w.message) for w in seen] == ["after"]
    said.clear()
    with console.library_warnings("report", echo=said.append):
        pass
    assert said == []  # nothing to say when nothing was written
