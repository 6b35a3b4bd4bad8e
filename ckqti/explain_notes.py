"""What an explanation says in words, the same in the terminal and on the page: where rerank ranks otherwise,
what a model's regions are, where TK's document was cut; and where a kernel falls in the kernel palettes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckqti.models.kernels import TK_MUS

if TYPE_CHECKING:
    from ckqti.explain import Explanation

def kernel_shade(mu: float) -> int:
    """Where a kernel centred at ``mu`` falls in the kernel palettes (terminal and page): at the nearest
    of TK_MUS's centres, so a model with other kernels is coloured by what they measure, not by position."""
    return min(range(len(TK_MUS)), key=lambda i: abs(TK_MUS[i] - mu))


def rerank_notes(e: Explanation) -> list[str]:
    """Where ``ckqti rerank`` does not rank by :attr:`Explanation.score`: a query it skips, a document
    it ranks last (the model's score there is an artefact: TKL's and IDCM's missing windows count 0)."""
    notes = []
    if e.rerank_skips:
        notes.append(f"rerank skips this query ({e.rerank_skips}): it ranks no document by this score")
    if e.ranked_last:
        notes.append("the model reads no word it knows in this document: rerank ranks it below every document "
                     "it reads, not by this score")
    return notes


def region_note(e: Explanation) -> str:
    """What a TKL's or IDCM's regions are and how they make the score, in the model's own settings."""
    s = e.settings
    if e.kind == "tkl":
        n = s["neighbours"]
        combine = (f"each with its {n} neighbour{'s' if n != 1 else ''} on each side" if n else "them")
        # non-overlapping for every window and stride (ckqti.models.tkl.top_regions)
        return (f"TKL's {s['regions']} best saturation windows ({s['saturation_window']} terms each, non-overlapping); "
                f"the document score combines {combine} by learned weights.")
    context = f"; it also read {s['overlap']} tokens on each side" if s["overlap"] else ""
    return (f"The windows (at most {s['sample_n']}) IDCM's selector sent to the cross-encoder ({s['window']}-token "
            f"centres{context}); the best {s['top_k']} cross-encoder score{'s make' if s['top_k'] != 1 else ' makes'} "
            "the document score.")


def closed_note(e: Explanation) -> str | None:
    """What the terms scoring the model's closed-pair constant (:attr:`Explanation.closed_score`, when not
    0) are: a user read NDRM3's -0.8660 for three absent words as evidence against the document."""
    if not e.closed_score:
        return None
    closed = [t for t, s in zip(e.query_tokens, e.term_scores) if abs(s - e.closed_score) <= 1e-5 * max(1.0, abs(s))]
    if not closed:
        return None
    return (f"{e.closed_score:.4f}: what a term adds to every document that neither holds it nor comes near it "
            f"({', '.join(dict.fromkeys(closed))}): it ranks none of them above another")
