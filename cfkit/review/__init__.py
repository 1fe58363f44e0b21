"""Looking at edits: the terminal review and the contact sheet.

* :mod:`cfkit.review.panels` — the view's pictures as pixels: outline beside the mask, zoom, heat map, leaks
* :mod:`cfkit.review.view` — one edit's header, panels side by side and check, fitted to the console (Rich renderable)
* :mod:`cfkit.review.screen` — the interactive screen: view, message and a key bar that always fits
* :mod:`cfkit.review.terminal` — the review's arrow keys and its refusal without a terminal (the terminal
  itself, keys, resizes and half-block images, is :mod:`cfkit.terminal`)
* :mod:`cfkit.review.loop` — review decisions, pending specs, candidates and the interactive key loop
* :mod:`cfkit.review.picture` — the view as a PNG
* :mod:`cfkit.review.sheet` — the HTML and PNG contact sheet of all pairs
"""
