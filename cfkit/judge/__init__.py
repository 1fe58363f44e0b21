"""A judge model's first pass over what people check by hand: counterfactual edits, screened by fixed questions.

:mod:`cfkit.judge.questions` reads the question file (``judge-screen.yaml``,
packaged or the workspace's own) and :mod:`cfkit.judge.screen` asks a judge
every question about each edit, stores the answers (resumable: an answer
already stored is not asked again) and says which edits it doubts. A doubt
flags an edit for a person; it never accepts or rejects one.
"""
