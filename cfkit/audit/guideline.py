"""The annotation guideline: the three judgements of the paper's evidence-grounding audit, in plain words.

After the AesCanvas supplement (arXiv 2608.26713, S2.2.3 "Evidence-grounded
human evaluation" and S2.3.3, eqs. S20-S21). Shown by the ``g`` key and by
``cfkit audit guideline``.
"""

GUIDELINE = """\
Annotation guideline: evidence-grounded accuracy (AesCanvas, Table S8)

You see a case (its image, scenario, options and gold decision), the expert
rationale naming the decisive visible cue, and one model's response. Judge the
response on its own; you never see which model wrote it or what the other
annotator decided.

Answer correct   Does the response select the gold option? Pre-filled from
                 the answer parser; press a to override it when the parser
                 misread the reply (e.g. an opening "A" read as option A).
Cue identified   Does the response name the decisive visible cue of the
                 rationale, or another visible detail that warrants the same
                 decision? Its wording need not match the rationale's. A cue
                 that is not in the image, or only a general impression
                 ("the style is calm", "beautiful colours"), is no.
Linked to use    Does the response explain why that cue makes the image
                 suitable or unsuitable for the stated use? Naming the cue
                 without the reason, or with a wrong reason, is no.
Unsure           Press u when you cannot decide: the item is then discussed
                 in adjudication even if your label matches the other one.

EGA counts a response that meets all three. Unsupported is the share of
correct answers that fail the cue or the link.

[model], [vendor] and [self-description] mark strings that named the model;
they were masked when the audit was planned. Leave a note (m) for anything
the adjudicator should know."""

HELP = """\
Keys
  y / n     answer the question marked ▶: cue identified, then linked to use
  tab       move ▶ between cue and link (c and l jump to one)
  a         flip "answer correct" (pre-filled from the parser)
  u         mark this item unsure, or clear the mark (annotators only)
  m         type a note (Enter alone keeps the note you have)
  b / s     back to the previous item / skip to the next one
  j k ↓ ↑   scroll the text; space and PgDn scroll a page
  g         the annotation guideline
  ?         this help
  q         quit: every decision is saved already; run it again to resume

In the guideline and this help, j/k scroll; any other key closes them."""
