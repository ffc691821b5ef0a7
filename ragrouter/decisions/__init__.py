"""Decisions a user can afford: how many queries a comparison needs (``plan``), and stopping a
cell's comparison as soon as it is decided (``run --until-decided``); the estimates behind them
use this machine's measured model speeds (``speedprobe``, ``run --dry-run --probe``)."""
