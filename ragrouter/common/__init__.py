"""Helpers every layer may use, with no project import of their own: the statistics of every
interval and paired test (:mod:`~ragrouter.common.stats`) and the rule-based sentence splitter
(:mod:`~ragrouter.common.sentences`)."""
