"""`ragrouter serve`: an OpenAI-compatible HTTP server that routes every question.

See :mod:`ragrouter.serve.app` for the endpoints and :mod:`ragrouter.serve.calibration` for
the cost-share threshold.
"""
