"""The evidence-grounding audit (the paper's Table 6 / Table S8), annotated blind in the terminal.

Does a model's correct answer rest on the decisive visible cue? Two people
judge each audited reply — answer correct, decisive cue identified, cue
linked to the stated use — without seeing the model or each other's labels;
their agreement is measured before disagreements are resolved; the final
labels give each model's accuracy, EGA and Unsupported (``cfkit report --ega``).

Modules, one concept each:

    masking       masking the strings by which a reply names its model
    plan          freezing an audit: cases, items, input hashes
    items         the audit as annotators see it (blinded), their orders, the un-blinded record, progress
    labelling     giving a label, one saved change at a time
    agreement     κ and AC1 per criterion before adjudication, the disagreements
    adjudication  resolving disagreements with a note
    exchange      worksheets (JSON Lines, CSV) exported and imported
    guideline     the annotation guideline and the keys' help
    view          the Rich view of one item (80×24 and up)
    keys          where a session's keys come from (the terminal, in cbreak mode)
    loop          the interactive annotate and adjudicate sessions
    judge_labels  the judge model's audit questions, and which of its stored labels count

The tables are :mod:`cfkit.store.audits` (plans, items) and
:mod:`cfkit.store.audit_labels` (annotators, labels, final labels).
"""
