"""Maintainer tools (not shipped): one package per family, ``tools/<family>/``.

Scripts put the repository root on ``sys.path`` once and import ``tools.<family>.<module>``;
tests import them the same way (pytest puts the repository root on the path).
"""
