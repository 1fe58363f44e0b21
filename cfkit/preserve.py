"""Non-target preservation: did an edit change the cue and keep everything else?

An edit is compared with its source image at the source's size. Two regions
matter:

* the **mask** M (255 = edit), where the image *should* change, and
* the **keep region** K: every pixel farther than ``margin`` pixels (Euclidean)
  from M, minus a ``border`` of pixels along the image's edges (editors and
  resamplers disturb edges, and windowed metrics pad there).

Measured for each output of an edit (the editor's ``raw`` image and the
``composite`` pasted back over the original outside the mask):

``ssim_out``
    scikit-image's ``structural_similarity(full=True, data_range=255,
    channel_axis=-1)`` map, averaged over the channels and then over K minus
    the mask dilated by the SSIM window (7 × 7, so no window touches M).
``mse_out`` / ``psnr_out``
    Mean squared error over K's pixels only (0..255 scale, all channels), and
    PSNR = 10·log10(255² / MSE) in dB. ``psnr_out`` is null when the MSE is 0
    (identical over K: PSNR is infinite).
``lpips_out`` / ``lpips_in``
    LPIPS (Zhang et al. 2018, the ``lpips`` package, AlexNet, ``spatial=True``,
    inputs scaled to [-1, 1]) averaged over K eroded by ``lpips_erode`` more
    pixels (the spatial map spreads around a change) and over M. Images whose
    longest side exceeds ``LPIPS_WORKING_SIZE`` (512) are scaled down for the
    network and the map is scaled back. Null when the AlexNet ImageNet weights
    are not on this machine; see :func:`load_lpips`.
``mad_in``
    Mean absolute difference inside M, as a fraction of full scale (0..1).
``leak_share`` / ``leak_boxes``
    Share of K's pixels whose largest channel difference exceeds
    ``leak_delta`` (0..255), and the bounding boxes ``[x0, y0, x1, y1]``
    (pixels, end-exclusive) of the connected leaks, largest first.

Default thresholds (:class:`Thresholds`; a spec's ``checks:`` overrides
``lpips_out_max``, ``ssim_out_min``, ``psnr_out_min``, ``change_in_min``,
``leak_max`` and ``margin``; ``[check] margin`` in cfkit.toml sets the
workspace default):

=================  ========  ===================================================
threshold          default   fails when
=================  ========  ===================================================
``ssim_out_min``   0.95      SSIM over K is lower
``psnr_out_min``   30 dB     PSNR over K is lower
``lpips_out_max``  0.05      LPIPS over eroded K is higher (when measured)
``leak_max``       0.01      more than 1 % of K changed by more than 24/255
``mad_in_min``     0.02      the mean absolute change inside M is smaller
``change_in_min``  0.05      LPIPS inside M is smaller (when measured)
=================  ========  ===================================================

The last two catch a no-op edit. Without LPIPS weights the verdict is decided
on the other figures and marked "without LPIPS".
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from scipy import ndimage

from cfkit.errors import ConfigError, ImageError, InputError, SpecError
from cfkit.hints import install_hint
from cfkit.images import image_array
from cfkit.specs import Checks, load_mask, load_spec
from cfkit.store import Store, now, to_json
from cfkit.workspace import Workspace

#: Side of the square window scikit-image's SSIM uses by default.
SSIM_WINDOW = 7
#: File name torchvision gives AlexNet's ImageNet weights in torch's hub cache.
ALEXNET_FILE = "alexnet-owt-7be5be79.pth"
#: Environment variable naming the AlexNet weights file.
BACKBONE_ENV = "CFKIT_LPIPS_BACKBONE"
VARIANTS = ("raw", "composite")


# ── thresholds ─────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Thresholds:
    """Limits of the verdict and the geometry of the regions (see the module docstring)."""

    margin: int = 4
    border: int = 4
    lpips_erode: int = 16
    ssim_out_min: float = 0.95
    psnr_out_min: float = 30.0
    lpips_out_max: float = 0.05
    leak_max: float = 0.01
    leak_delta: int = 24
    mad_in_min: float = 0.02
    change_in_min: float = 0.05

    @classmethod
    def for_spec(cls, checks: Checks | None, *, margin: int | None = None) -> "Thresholds":
        """Defaults, then the workspace's margin, then the spec's own overrides."""
        base = cls() if margin is None else cls(margin=margin)
        if checks is None:
            return base
        overrides = {k: v for k, v in checks.model_dump().items() if v is not None}
        return replace(base, **overrides)


# ── regions ────────────────────────────────────────────────────────────────


def grow(region: np.ndarray, radius: float) -> np.ndarray:
    """Pixels within Euclidean distance ``radius`` of a boolean region (the region included).

    Only the region's bounding box, padded by the radius, is transformed: no
    pixel outside it can be that close, and a small mask on a large image costs little.
    """
    rows = np.flatnonzero(region.any(axis=1))
    if rows.size == 0:
        return np.zeros_like(region)
    cols = np.flatnonzero(region.any(axis=0))
    pad = int(np.ceil(radius)) + 1
    y0, y1 = max(0, rows[0] - pad), min(region.shape[0], rows[-1] + pad + 1)
    x0, x1 = max(0, cols[0] - pad), min(region.shape[1], cols[-1] + pad + 1)
    out = np.zeros_like(region)
    out[y0:y1, x0:x1] = ndimage.distance_transform_edt(~region[y0:y1, x0:x1]) <= radius
    return out


def _clear_border(region: np.ndarray, width: int) -> np.ndarray:
    if width > 0:
        region[:width, :] = region[-width:, :] = False
        region[:, :width] = region[:, -width:] = False
    return region


def keep_region(mask: np.ndarray, margin: int, border: int) -> np.ndarray:
    """K: pixels farther than ``margin`` from the mask, minus ``border`` pixels at the edges."""
    return _clear_border(~grow(mask > 0, margin), border)


def _dilate_square(region: np.ndarray, radius: int) -> np.ndarray:
    """Grow a boolean region by ``radius`` pixels in the chessboard metric (a square window)."""
    if radius <= 0:
        return region.copy()
    return ndimage.maximum_filter(region.astype(np.uint8), size=2 * radius + 1, mode="constant") > 0


def ssim_region(mask: np.ndarray, keep: np.ndarray, window: int = SSIM_WINDOW) -> np.ndarray:
    """K minus the mask dilated by the SSIM window, so that no window centred there touches M."""
    return keep & ~_dilate_square(mask > 0, window // 2)


def lpips_region(keep: np.ndarray, erode: int) -> np.ndarray:
    """K eroded by ``erode`` more pixels (Euclidean)."""
    if erode <= 0:
        return keep.copy()
    return ndimage.distance_transform_edt(keep) > erode


# ── pixel metrics ──────────────────────────────────────────────────────────


def masked_ssim(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float | None:
    """Mean of the SSIM map (channel-averaged) over ``region``; None when the region is empty."""
    from skimage.metrics import structural_similarity

    if not region.any():
        return None
    _, ssim_map = structural_similarity(
        original, edited, full=True, data_range=255, channel_axis=-1, win_size=SSIM_WINDOW
    )
    return float(ssim_map.mean(axis=-1)[region].mean())


def masked_mse(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float | None:
    """Mean squared error over the region's pixels only (0..255 scale, all channels)."""
    if not region.any():
        return None
    diff = original[region].astype(np.float64) - edited[region].astype(np.float64)
    return float(np.mean(diff * diff))


def psnr(mse: float | None) -> float | None:
    """PSNR in dB for 8-bit images; None when the MSE is 0 (infinite) or unknown."""
    if mse is None or mse == 0:
        return None
    return 10.0 * math.log10(255.0**2 / mse)


def mean_abs_change(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float | None:
    """Mean absolute difference over the region, as a fraction of full scale (0..1)."""
    if not region.any():
        return None
    diff = np.abs(original[region].astype(np.float64) - edited[region].astype(np.float64))
    return float(diff.mean() / 255.0)


@dataclass(frozen=True)
class Leaks:
    """Pixels of K that changed by more than the leak threshold."""

    share: float  # 0..1 of K's pixels
    boxes: list[list[int]]  # [x0, y0, x1, y1], end-exclusive, largest leak first
    count: int  # connected leak regions in all
    pixels: np.ndarray = field(repr=False, compare=False)  # boolean leak map, for views


#: How many leak boxes are kept in the metrics (the count says how many there were).
MAX_LEAK_BOXES = 20


def find_leaks(original: np.ndarray, edited: np.ndarray, keep: np.ndarray, delta: int) -> Leaks:
    """Leaks: pixels of K whose largest channel difference exceeds ``delta`` (0..255)."""
    from skimage.measure import label, regionprops

    diff = np.abs(original.astype(np.int16) - edited.astype(np.int16)).max(axis=-1)
    leak = keep & (diff > delta)
    total = int(keep.sum())
    share = float(leak.sum()) / total if total else 0.0
    labels = label(leak, connectivity=2)
    props = sorted(regionprops(labels), key=lambda r: r.area, reverse=True)
    boxes = [[int(r.bbox[1]), int(r.bbox[0]), int(r.bbox[3]), int(r.bbox[2])] for r in props[:MAX_LEAK_BOXES]]
    return Leaks(share=share, boxes=boxes, count=len(props), pixels=leak)


# ── LPIPS ──────────────────────────────────────────────────────────────────


def _to_tensor(image: np.ndarray):
    import torch

    # LPIPS expects NCHW in [-1, 1].
    array = image.astype(np.float32) / 127.5 - 1.0
    return torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1)))[None]


#: LPIPS runs on both images scaled (area averaging) to this longest side when they are larger,
#: and its map is scaled back. AlexNet's receptive fields are fixed in pixels, so a fixed working
#: size keeps LPIPS comparable across image sizes, and a 1024² check stays within its time budget.
LPIPS_WORKING_SIZE = 512


def working_shape(height: int, width: int, longest: int) -> tuple[int, int]:
    """``(height, width)`` scaled so the longest side is at most ``longest``; 0 keeps the size."""
    if longest <= 0 or max(height, width) <= longest:
        return height, width
    scale = longest / max(height, width)
    return max(1, round(height * scale)), max(1, round(width * scale))


def working_image(image: np.ndarray, longest: int) -> np.ndarray:
    """``image`` scaled down (box filter) to :func:`working_shape`."""
    height, width = working_shape(*image.shape[:2], longest)
    if (height, width) == image.shape[:2]:
        return image
    return np.asarray(Image.fromarray(image).resize((width, height), Image.Resampling.BOX))


class LpipsScorer:
    """Spatial LPIPS distance maps from an ``lpips.LPIPS`` module built with ``spatial=True``.

    The reference image's features are kept, so checking the raw and the
    composite output of one edit runs the network three times, not four.
    """

    def __init__(self, module: Any, *, description: str, working_size: int = LPIPS_WORKING_SIZE):
        self.module = module
        self.description = description  # e.g. "AlexNet weights from ~/.cache/torch/hub/…"
        self.working_size = working_size
        self._reference: np.ndarray | None = None  # held, so identity cannot be reused
        self._reference_feats: list | None = None

    def _features(self, image: np.ndarray) -> list:
        import lpips

        net = self.module
        outs = net.net.forward(net.scaling_layer(_to_tensor(working_image(image, self.working_size))))
        return [lpips.normalize_tensor(o) for o in outs]

    def distance_map(self, reference: np.ndarray, other: np.ndarray) -> np.ndarray:
        """LPIPS per pixel, ``(H, W)`` float, between two uint8 RGB images of one size."""
        import lpips
        import torch

        with torch.inference_mode():
            if reference is not self._reference:
                self._reference_feats = self._features(reference)
                self._reference = reference
            feats = self._features(other)
            work = working_shape(*reference.shape[:2], self.working_size)
            total = None
            for k, (a, b) in enumerate(zip(self._reference_feats, feats)):
                layer = lpips.upsample(self.module.lins[k]((a - b) ** 2), out_HW=work)
                total = layer if total is None else total + layer
            if work != reference.shape[:2]:
                total = torch.nn.functional.interpolate(total, size=reference.shape[:2], mode="bilinear",
                                                        align_corners=False)
        return total[0, 0].numpy().astype(np.float64)


@dataclass(frozen=True)
class LpipsLoad:
    """The outcome of looking for LPIPS: a scorer, or the one-line reason there is none."""

    scorer: LpipsScorer | None
    note: str  # where the weights came from, or why LPIPS is unavailable and how to fix it


def backbone_candidates(ws: Workspace | None, explicit: Path | None) -> tuple[Path | None, str]:
    """The weights file the user named (option, env, config), else torch's hub cache path."""
    if explicit is not None:
        return Path(explicit).expanduser(), "--lpips-weights"
    env = os.environ.get(BACKBONE_ENV)
    if env:
        return Path(env).expanduser(), BACKBONE_ENV
    if ws is not None and ws.config.check.lpips_backbone:
        configured = Path(ws.config.check.lpips_backbone).expanduser()
        return (configured if configured.is_absolute() else ws.root / configured), "[check] lpips_backbone in cfkit.toml"
    return None, "torch hub cache"


def hub_cache_file() -> Path:
    import torch

    return Path(torch.hub.get_dir()) / "checkpoints" / ALEXNET_FILE


_LOADED: dict[str, LpipsLoad] = {}


def load_lpips(ws: Workspace | None = None, explicit: Path | None = None) -> LpipsLoad:
    """LPIPS with AlexNet's ImageNet weights from a named file or torch's local hub cache.

    Nothing is downloaded: the backbone is built without weights and the state
    dict is read from disk. A file the user named that is missing or unreadable
    is an error; an empty cache only makes LPIPS unavailable.
    """
    path, source = backbone_candidates(ws, explicit)
    try:
        import lpips  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        return LpipsLoad(None, f"LPIPS unavailable: the 'lpips' package is not installed ({exc.name}); "
                               f"run {install_hint('lpips')}.")
    if path is None:
        path = hub_cache_file()
        if not path.is_file():
            return LpipsLoad(None, f"LPIPS unavailable: AlexNet ImageNet weights are not in {path.parent}; "
                                   f"put {ALEXNET_FILE} there, or pass --lpips-weights PATH (or set {BACKBONE_ENV}).")
    elif not path.is_file():
        raise ConfigError(f"{source}: LPIPS backbone weights {path} not found. "
                          f"Give the path of torchvision's {ALEXNET_FILE}.")
    key = str(path.resolve())
    if key not in _LOADED:
        _LOADED[key] = LpipsLoad(_build_scorer(path, source), f"LPIPS: AlexNet weights from {path}")
    return _LOADED[key]


def _build_scorer(path: Path, source: str) -> LpipsScorer:
    import lpips
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises pickle, zip and runtime errors for bad files
        raise ConfigError(f"{source}: {path} is not a readable PyTorch weights file ({exc.__class__.__name__}). "
                          f"Give torchvision's {ALEXNET_FILE}.") from exc
    with warnings.catch_warnings():
        # pnet_rand=True builds the backbone without asking torchvision for weights (no download);
        # the package's own calibrated linear layers are still loaded (pretrained=True).
        warnings.simplefilter("ignore")
        module = lpips.LPIPS(net="alex", pretrained=True, pnet_rand=True, spatial=True, verbose=False)
    # torchvision names the layers features.N.*; lpips regroups them as sliceK.N.*.
    slice_of = {}
    for name, _ in module.net.named_parameters():
        slice_name, index, _param = name.split(".")
        slice_of[index] = slice_name
    mapped = {}
    for key, tensor in state.items() if isinstance(state, dict) else ():
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "features" and parts[1] in slice_of:
            mapped[f"{slice_of[parts[1]]}.{parts[1]}.{parts[2]}"] = tensor
    try:
        module.net.load_state_dict(mapped, strict=True)
    except RuntimeError as exc:
        raise ConfigError(f"{source}: {path} does not hold AlexNet's feature layers ({str(exc).splitlines()[0]}). "
                          f"Give torchvision's {ALEXNET_FILE}.") from exc
    module.eval()
    return LpipsScorer(module, description=f"AlexNet weights from {path}")


# ── measuring and judging ──────────────────────────────────────────────────


@dataclass(frozen=True)
class Metrics:
    """Preservation figures of one edited image against its original (see the module docstring)."""

    ssim_out: float | None
    mse_out: float | None
    psnr_out: float | None
    lpips_out: float | None
    lpips_in: float | None
    mad_in: float | None
    leak_share: float
    leak_boxes: list[list[int]]
    leak_count: int
    keep_pixels: int
    mask_pixels: int
    ssim_pixels: int
    lpips_pixels: int
    width: int
    height: int
    margin: int
    lpips_note: str | None = None  # why LPIPS is missing, or where its weights came from
    resized_from: list[int] | None = None  # [w, h] when the edit had another size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(original: np.ndarray, edited: np.ndarray, mask: np.ndarray, thresholds: Thresholds,
            scorer: LpipsScorer | None = None, *, lpips_note: str | None = None) -> tuple[Metrics, Leaks]:
    """Every preservation figure of ``edited`` against ``original`` (uint8 RGB, one size)."""
    if original.shape != edited.shape or original.ndim != 3:
        raise ImageError(f"images to compare must be (H, W, 3) of one size; got {original.shape} and {edited.shape}.")
    if mask.shape != original.shape[:2]:
        raise SpecError(f"mask is {mask.shape[1]}x{mask.shape[0]} but the image is "
                        f"{original.shape[1]}x{original.shape[0]}; redraw the mask at the image's size.")
    inside = mask > 0
    keep = keep_region(mask, thresholds.margin, thresholds.border)
    if not inside.any():
        raise SpecError("the edit mask is empty; paint the region to edit in white.")
    if not keep.any():
        raise SpecError(f"the mask plus a {thresholds.margin}px margin covers the whole image; nothing is left "
                        "to check. Tighten the mask or lower checks.margin.")
    ssim_keep = ssim_region(mask, keep)
    lp_keep = lpips_region(keep, thresholds.lpips_erode) if scorer is not None else np.zeros_like(keep)
    mse = masked_mse(original, edited, keep)
    leaks = find_leaks(original, edited, keep, thresholds.leak_delta)
    lpips_out = lpips_in = None
    if scorer is not None:
        distance = scorer.distance_map(original, edited)
        lpips_out = float(distance[lp_keep].mean()) if lp_keep.any() else None
        lpips_in = float(distance[inside].mean())
    metrics = Metrics(
        ssim_out=masked_ssim(original, edited, ssim_keep),
        mse_out=mse,
        psnr_out=psnr(mse),
        lpips_out=lpips_out,
        lpips_in=lpips_in,
        mad_in=mean_abs_change(original, edited, inside),
        leak_share=leaks.share,
        leak_boxes=leaks.boxes,
        leak_count=leaks.count,
        keep_pixels=int(keep.sum()),
        mask_pixels=int(inside.sum()),
        ssim_pixels=int(ssim_keep.sum()),
        lpips_pixels=int(lp_keep.sum()),
        width=int(original.shape[1]),
        height=int(original.shape[0]),
        margin=thresholds.margin,
        lpips_note=lpips_note,
    )
    return metrics, leaks


@dataclass(frozen=True)
class Verdict:
    verdict: str  # pass | fail
    reasons: list[str]  # why it failed; empty on pass
    lpips_measured: bool

    @property
    def label(self) -> str:
        """``pass``, ``fail``, ``pass (without LPIPS)`` …"""
        return self.verdict + ("" if self.lpips_measured else " (without LPIPS)")


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
                       f"{t.leak_delta}/255 (limit {100 * t.leak_max:.2f}%) in {metrics.leak_count} places")
    if metrics.lpips_out is not None and metrics.lpips_out > t.lpips_out_max:
        reasons.append(f"LPIPS outside the mask {metrics.lpips_out:.4f} > {t.lpips_out_max}")
    if metrics.mad_in is not None and metrics.mad_in < t.mad_in_min:
        reasons.append(f"too little change inside the mask: mean abs. difference {metrics.mad_in:.4f} < {t.mad_in_min}")
    if metrics.lpips_in is not None and metrics.lpips_in < t.change_in_min:
        reasons.append(f"too little change inside the mask: LPIPS {metrics.lpips_in:.4f} < {t.change_in_min}")
    return Verdict("fail" if reasons else "pass", reasons, metrics.lpips_out is not None)


# ── edits in the store ─────────────────────────────────────────────────────


@dataclass(frozen=True)
class CheckResult:
    """One stored check of one output (``raw`` or ``composite``) of one edit."""

    id: int
    edit_id: int
    spec_id: str
    variant: str
    metrics: dict[str, Any]
    verdict: str
    reasons: list[str]
    lpips_measured: bool
    created_at: str

    @property
    def label(self) -> str:
        return self.verdict + ("" if self.lpips_measured else " (without LPIPS)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"label": self.label}


def _row_to_result(row) -> CheckResult:
    return CheckResult(id=row["id"], edit_id=row["edit_id"], spec_id=row["spec_id"], variant=row["variant"],
                       metrics=json.loads(row["metrics"]), verdict=row["verdict"], reasons=json.loads(row["reasons"]),
                       lpips_measured=bool(row["lpips"]), created_at=row["created_at"])


def edit_row(store: Store, edit_id: int):
    rows = store.query("SELECT * FROM edits WHERE id = ?", (edit_id,))
    if not rows:
        raise InputError(f"no edit with id {edit_id} in {store.path}. List edits with 'cfkit specs list'.")
    return rows[0]


def newest_edit_id(store: Store, spec_id: str) -> int | None:
    """The newest successful edit of a spec, or None."""
    rows = store.query("SELECT id FROM edits WHERE spec_id = ? AND status = 'ok' ORDER BY id DESC LIMIT 1", (spec_id,))
    return rows[0]["id"] if rows else None


def latest_checks(store: Store, edit_id: int) -> dict[str, CheckResult]:
    """The newest stored check of each variant of an edit."""
    rows = store.query("SELECT * FROM checks WHERE edit_id = ? ORDER BY id", (edit_id,))
    return {row["variant"]: _row_to_result(row) for row in rows}


@dataclass(frozen=True)
class EditImages:
    """An edit's original, outputs and mask as arrays at the original's size."""

    spec_id: str
    edit_id: int
    original: np.ndarray
    mask: np.ndarray
    outputs: dict[str, np.ndarray]  # variant -> image
    resized: dict[str, list[int]]  # variant -> [w, h] of the file when it was resized
    spec: Any  # cfkit.specs.Spec


def load_edit_images(ws: Workspace, store: Store, edit_id: int) -> EditImages:
    """Read an edit's files and its spec's mask; outputs of another size are resized (same aspect only)."""
    from cfkit.specs import try_load_cases

    row = edit_row(store, edit_id)
    spec_id = row["spec_id"]
    if row["status"] != "ok":
        raise InputError(f"edit {edit_id} of {spec_id} is '{row['status']}' ({row['error'] or 'no image'}); "
                         f"nothing to check. Make a new one with 'cfkit edit {spec_id}'.")
    spec = load_spec(ws, spec_id).spec
    cases = try_load_cases(ws)
    if cases is None:
        raise InputError(f"cases file {ws.cases_path} is missing, so {spec_id}'s original image cannot be found. "
                         "Set [dataset] cases in cfkit.toml.")
    case = cases.get(spec.case)
    original = image_array(cases.image_paths(case)[0], what=f"case {case.id} image")
    height, width = original.shape[:2]
    mask = load_mask(ws, spec, (width, height)).array
    outputs: dict[str, np.ndarray] = {}
    resized: dict[str, list[int]] = {}
    for variant in VARIANTS:
        rel = row[f"{variant}_path"]
        if not rel:
            continue
        path = Path(rel) if Path(rel).is_absolute() else ws.store_dir / rel
        image = image_array(path, what=f"edit {edit_id} {variant} image")
        if image.shape[:2] != (height, width):
            h, w = image.shape[:2]
            if abs((w / h) / (width / height) - 1) > 0.01:
                raise ImageError(f"edit {edit_id} {variant} image {path} is {w}x{h} but the original is "
                                 f"{width}x{height} (another aspect ratio); the check cannot align them.")
            image = np.asarray(Image.fromarray(image).resize((width, height), Image.Resampling.LANCZOS))
            resized[variant] = [w, h]
        outputs[variant] = image
    if not outputs:
        raise InputError(f"edit {edit_id} of {spec_id} records no image file; nothing to check.")
    return EditImages(spec_id, edit_id, original, mask, outputs, resized, spec)


def check_edit(ws: Workspace, store: Store, edit_id: int, *, lpips_weights: Path | None = None,
               scorer: LpipsScorer | None = None) -> list[CheckResult]:
    """Measure every output of an edit, judge it and store one ``checks`` row per variant.

    LPIPS uses ``scorer`` when given, else :func:`load_lpips` (``lpips_weights``,
    ``$CFKIT_LPIPS_BACKBONE``, ``[check] lpips_backbone``, torch's hub cache).
    """
    # 1. Inputs: the edit's files, its spec's mask and thresholds.
    images = load_edit_images(ws, store, edit_id)
    thresholds = Thresholds.for_spec(images.spec.checks, margin=ws.config.check.margin)
    # 2. LPIPS, when its weights are here.
    if scorer is None:
        loaded = load_lpips(ws, lpips_weights)
        scorer, note = loaded.scorer, loaded.note
    else:
        note = f"LPIPS: {scorer.description}"
    # 3. Measure and judge each output, then store all rows together.
    rows = []
    for variant, edited in images.outputs.items():
        metrics, _ = measure(images.original, edited, images.mask, thresholds, scorer, lpips_note=note)
        if variant in images.resized:
            metrics = replace(metrics, resized_from=images.resized[variant])
        verdict = judge(metrics, thresholds)
        rows.append((variant, metrics, verdict))
    created = now()
    results = []
    with store.transaction() as conn:
        for variant, metrics, verdict in rows:
            cursor = conn.execute(
                "INSERT INTO checks (edit_id, spec_id, variant, metrics, verdict, reasons, lpips, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (edit_id, images.spec_id, variant, to_json(metrics.to_dict()), verdict.verdict,
                 to_json(verdict.reasons), int(verdict.lpips_measured), created),
            )
            results.append(CheckResult(id=cursor.lastrowid, edit_id=edit_id, spec_id=images.spec_id, variant=variant,
                                       metrics=metrics.to_dict(), verdict=verdict.verdict, reasons=verdict.reasons,
                                       lpips_measured=verdict.lpips_measured, created_at=created))
    return results


def check_spec(ws: Workspace, store: Store, spec_id: str, *, lpips_weights: Path | None = None,
               scorer: LpipsScorer | None = None) -> list[CheckResult]:
    """:func:`check_edit` on the newest successful edit of a spec."""
    load_spec(ws, spec_id)  # a helpful error for an unknown id
    edit_id = newest_edit_id(store, spec_id)
    if edit_id is None:
        raise InputError(f"{spec_id} has no successful edit yet; make one with 'cfkit edit {spec_id}'.")
    return check_edit(ws, store, edit_id, lpips_weights=lpips_weights, scorer=scorer)


def specs_with_edits(store: Store) -> list[str]:
    """Every spec id with at least one successful edit, sorted."""
    return [r["spec_id"] for r in store.query("SELECT DISTINCT spec_id FROM edits WHERE status = 'ok' ORDER BY spec_id")]
