"""The verdict of a preservation check: every figure against its threshold."""

from __future__ import annotations

from dataclasses import dataclass

from cfkit.plural import plural
from cfkit.preserve.metrics import Metrics
from cfkit.preserve.thresholds import Thresholds
from cfkit.vocabulary import verdict_label


@dataclass(frozen=True)
class Verdict:
    verdict: str  # pass | fail
    reasons: list[str]  # why it failed; empty on pass
    lpips_measured: bool

    @property
    def label(self) -> str:
        """``pass``, ``fail``, ``pass (without LPIPS)`` …"""
        return verdict_label(self.verdict, self.lpips_measured)


def judge(metrics: Metrics, thresholds: Thresholds) -> Verdict:
    """Compare the figures with the thresholds; every failed limit becomes a reason."""
    t = thresholds
    reasons: list[str] = []
    if metrics.ssim_out is not None and metrics.ssim_out < t.ssim_out_min:
        reasons.append(f"SSIM outside the mask {metrics.ssim_out:.4f} < {t.ssim_out_min}")
    if metrics.psnr_out is not None and metrics.psnr_out < t.psnr_out_min:
        reasons.append(f"PSNR outside the mask {metrics.psnr_out:.2f} dB < {t.psnr_out_min} dB")
    if metrics.leak_share > t.leak_max:
        reasons.append(f"{100 * metrics.leak_share:.2f}% of the keep region changed by more than "
                       f"{t.leak_delta}/255 (limit {100 * t.leak_max:.2f}%) in {plural(metrics.leak_count, 'place')}")
    if metrics.lpips_out is not None and metrics.lpips_out > t.lpips_out_max:
        reasons.append(f"LPIPS outside the mask {metrics.lpips_out:.4f} > {t.lpips_out_max}")
    if metrics.mad_in is not None and metrics.mad_in < t.mad_in_min:
        reasons.append(f"too little change inside the mask: mean abs. difference {metrics.mad_in:.4f} < {t.mad_in_min}")
    if metrics.lpips_in is not None and metrics.lpips_in < t.change_in_min:
        reasons.append(f"too little change inside the mask: LPIPS {metrics.lpips_in:.4f} < {t.change_in_min}")
    return Verdict("fail" if reasons else "pass", reasons, metrics.lpips_out is not None)
