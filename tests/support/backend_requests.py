"""A probe request asked of a backend object directly, with the backend closed afterwards."""

from __future__ import annotations

import asyncio

from cfkit.backends import Generation, ImageData, ProbeRequest, RequestMeta
from cfkit.probe import answer_schema


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))  # the bytes only have to arrive intact


def request(option_ids=("A", "B"), images=(ImageData(PNG, "image/png"),)) -> ProbeRequest:
    return ProbeRequest(
        system="Answer from the supplied content only.", user="Question: fit?\n\nOptions:\nA. Yes\nB. No",
        images=tuple(images), option_ids=tuple(option_ids), schema=answer_schema(option_ids),
        generation=Generation(temperature=0.0, max_tokens=64),
        meta=RequestMeta(suite="contextcanvas", case_id="T001", pair_id="", condition="image", yes_option="A"),
    )


def ask(b, req=None):
    return asyncio.run(_ask(b, req or request()))


async def _ask(b, req):
    try:
        return await b.answer(req)
    finally:
        await b.aclose()
