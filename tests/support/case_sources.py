"""Source tables for cases import, written as the formats users bring."""

from __future__ import annotations


# Four cases as the supplement describes a record (evaluation id, original case id, image
# descriptor(s), question, options, gold option id and text, rationale, source basis, provenance
# and rights): two Yes/No cases, one three-option case and one paired-image case.
ROWS = [
    {"evaluation_id": "CC001", "original_case_id": "HB084", "question": "Is this painting suitable for a nursery?",
     "option_A": "Yes", "option_B": "No", "option_C": None, "gold_option_id": "B", "gold_option_text": "No",
     "rationale": "A distressing letter.", "source_basis": "museum label", "domain": "painting",
     "title": "The Governess", "creator": "R. Redgrave", "license": "Public domain", "rights": "free to reuse"},
    {"evaluation_id": "CC002", "original_case_id": "HB120", "question": "Is this photo suitable for a summer ad?",
     "option_A": "Yes", "option_B": "No", "option_C": None, "gold_option_id": "A", "gold_option_text": "Yes",
     "rationale": "Green foliage.", "source_basis": "photographer's note", "domain": "photography",
     "title": "Village", "creator": "A. Person", "license": "CC0 1.0", "rights": "free to reuse"},
    {"evaluation_id": "CC003", "original_case_id": "HB200", "question": "Which event fits this picture best?",
     "option_A": "A wedding", "option_B": "A funeral", "option_C": "A race", "gold_option_id": "C",
     "gold_option_text": "A race", "rationale": "Runners.", "source_basis": "caption", "domain": "photography",
     "title": "Race", "creator": "B. Person", "license": "CC BY 4.0", "rights": "attribution"},
    {"evaluation_id": "CC004", "original_case_id": "HB301", "question": "Is this pair suitable for a diptych?",
     "option_A": "Yes", "option_B": "No", "option_C": None, "gold_option_id": "B", "gold_option_text": "No",
     "rationale": "The palettes clash.", "source_basis": "curator", "domain": "painting",
     "title": "Pair", "creator": "C. Person", "license": "Public domain", "rights": "free to reuse"},
]


IMAGES = {"CC001": ["CC001.png"], "CC002": ["CC002.png"], "CC003": ["CC003.png"], "CC004": ["CC004_1.png", "CC004_2.png"]}


def _json_rows() -> list[dict]:
    # Options as one list field, images as a list of paths, no option_X columns.
    rows = []
    for row in ROWS:
        rest = {k: v for k, v in row.items() if not k.startswith("option_")}
        rows.append(rest | {"options": [row[k] for k in ("option_A", "option_B", "option_C") if row[k]],
                            "image_descriptors": IMAGES[row["evaluation_id"]]})
    return rows
