"""``cfkit view``: a read-only web view of a workspace, served on loopback or written as a static site.

- :mod:`cfkit.view.data` reads what the pages show (runs, cases, replies, pairs) from the workspace;
- :mod:`cfkit.view.site` renders each page from Jinja2 templates (``cfkit/templates/view/``), every
  string escaped, no script anywhere;
- :mod:`cfkit.view.server` serves the pages on 127.0.0.1 with a Content-Security-Policy that forbids
  scripts and any request off the machine; :func:`cfkit.view.site.export` writes the same pages to a folder.
"""
