"""A person's review of the judge and of generated queries (issue 34).

``sample`` draws what to review, ``traces`` logs it to MLflow as traces and reads the human
assessments back, ``labels`` stores them (``human_labels``), ``figures`` measures the judge
against them. The commands are ``cli.py review start|pull`` (``ragrouter.commands.review``).
"""
