"""Decisions a user can afford: how many queries a comparison needs (``plan``), and stopping a
cell's comparison as soon as it is decided (``run --until-decided``)."""
