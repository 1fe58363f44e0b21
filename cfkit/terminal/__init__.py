"""The terminal, for the interactive review and audit sessions.

* :mod:`cfkit.terminal.keys` — single key presses (escape sequences and UTF-8
  characters whole), a line typed in ordinary mode, resizes as the key
  :data:`~cfkit.terminal.keys.RESIZE`, and whether a terminal is there at all;
* :mod:`cfkit.terminal.keybar` — a session's keys fitted to one or two lines,
  never parting a key from its label;
* :mod:`cfkit.terminal.halfblocks` — an image drawn with Unicode half blocks;
* :mod:`cfkit.terminal.paragraph` — a labelled text wrapped at words under a
  hanging indent, cut to a number of lines only with a note saying where it is whole.

Nothing here imports anything of cfkit but the error tree.
"""
