"""The old home of the promoted router model's class, kept so that models promoted before it
moved still load: their pickled pyfunc names ``ragrouter.routers.promotion.QuestionRouter``
(cloudpickle refers to a class by its module path), which a process that imported this
ragrouter resolves here. The class, ``routers promote`` and the champion lookup are
:mod:`ragrouter.answering.promotion`. Nothing else imports this module; its import of the
answering layer is the layer contract's exception for it (pyproject.toml, [tool.importlinter])."""

from ragrouter.answering.promotion import QuestionRouter  # noqa: F401 - the pickled path of promoted models

__all__ = ["QuestionRouter"]
