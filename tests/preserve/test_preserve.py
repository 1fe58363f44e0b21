"""Preservation checks against independent computations on synthetic images."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage.metrics import structural_similarity

from cfkit.edit_files import check_edit
from cfkit.errors import ConfigError
from cfkit.preserve import (
    LpipsScorer,
    Thresholds,
    judge,
    keep_region,
    measure,
)
from cfkit.specs import Checks
from cfkit.store import Store
from cfkit.weights.lpips import load_lpips
from cfkit.workspace import load_workspace
from support.edits import H, W, add_edit, box_mask, inside_change, tiny_original
from support.store_sql import table_rows
from support.workspace import gradient_image, run_cli

def brute_keep(mask: np.ndarray, margin: int, border: int) -> np.ndarray:
    """K computed pixel by pixel: Euclidean distance to the nearest mask pixel > margin, off the border."""
    ys, xs = np.nonzero(mask)
    keep = np.zeros(mask.shape, bool)
    for y in range(border, mask.shape[0] - border):
        for x in range(border, mask.shape[1] - border):
            keep[y, x] = np.min((ys - y) ** 2 + (xs - x) ** 2) > margin**2
    return keep


def brute_ssim_keep(mask: np.ndarray, keep: np.ndarray, half: int = 3) -> np.ndarray:
    """K pixels whose (2·half+1)² window contains no mask pixel."""
    out = keep.copy()
    for y, x in zip(*np.nonzero(keep)):
        window = mask[max(0, y - half): y + half + 1, max(0, x - half): x + half + 1]
        out[y, x] = not window.any()
    return out


def ssim_at(a: np.ndarray, b: np.ndarray, y: int, x: int) -> float:
    """SSIM at one pixel from Wang et al. (2004), 7x7 uniform window, sample covariance, per channel mean."""
    values = []
    for c in range(3):
        p = a[y - 3: y + 4, x - 3: x + 4, c].astype(np.float64).ravel()
        q = b[y - 3: y + 4, x - 3: x + 4, c].astype(np.float64).ravel()
        mp, mq = p.mean(), q.mean()
        vp, vq = p.var(ddof=1), q.var(ddof=1)
        cov = ((p - mp) * (q - mq)).sum() / (p.size - 1)
        c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
        values.append(((2 * mp * mq + c1) * (2 * cov + c2)) / ((mp**2 + mq**2 + c1) * (vp + vq + c2)))
    return float(np.mean(values))


def outside_noise(image: np.ndarray, sigma: float = 12.0, seed: int = 9) -> np.ndarray:
    """Noise on a patch far from the mask (rows 44..59, columns 60..89)."""
    rng = np.random.default_rng(seed)
    noisy = image.astype(np.float64)
    noisy[44:60, 60:90] += rng.normal(0, sigma, (16, 30, 3))
    return np.clip(np.round(noisy), 0, 255).astype(np.uint8)


# ── regions and pixel metrics ──────────────────────────────────────────────


def test_keep_region_matches_brute_force():
    mask = box_mask()
    for margin, border in ((0, 0), (4, 4), (7, 2)):
        assert np.array_equal(keep_region(mask, margin, border), brute_keep(mask, margin, border))


def test_untouched_background_gives_ssim_one_and_mse_zero():
    original = gradient_image(W, H, 0)
    edited = inside_change(original)
    metrics, leaks = measure(original, edited, box_mask(), Thresholds())
    # 1 up to float64 rounding of skimage's map (a few ulp).
    assert metrics.ssim_out == pytest.approx(1.0, abs=1e-12)
    assert metrics.mse_out == 0.0
    assert metrics.psnr_out is None  # infinite
    assert metrics.leak_share == 0.0 and leaks.boxes == []
    inside = box_mask() > 0
    by_hand = np.abs(original[inside].astype(int) - edited[inside].astype(int)).sum() / (inside.sum() * 3) / 255
    assert metrics.mad_in == pytest.approx(by_hand, rel=1e-12)
    assert metrics.lpips_out is None and metrics.lpips_in is None


def test_noise_outside_mask_lowers_metrics_by_the_independent_amounts():
    original = gradient_image(W, H, 0)
    edited = outside_noise(original)
    mask = box_mask()
    t = Thresholds()
    metrics, _ = measure(original, edited, mask, t)

    keep = brute_keep(mask, t.margin, t.border)
    diff = original.astype(np.float64) - edited.astype(np.float64)
    mse = sum(float((diff[y, x] ** 2).sum()) for y, x in zip(*np.nonzero(keep))) / (keep.sum() * 3)
    assert metrics.keep_pixels == keep.sum()
    assert metrics.mse_out == pytest.approx(mse, rel=1e-12)
    assert metrics.psnr_out == pytest.approx(10 * math.log10(255**2 / mse), rel=1e-12)
    assert 0 < metrics.mse_out

    ssim_keep = brute_ssim_keep(mask, keep)
    _, full = structural_similarity(original, edited, full=True, data_range=255, channel_axis=-1)
    assert metrics.ssim_pixels == ssim_keep.sum()
    assert metrics.ssim_out == pytest.approx(full.mean(axis=-1)[ssim_keep].mean(), abs=1e-12)
    assert metrics.ssim_out < 1.0
    # skimage's map agrees with the textbook formula at a pixel inside the noisy patch (tolerance 1e-9).
    assert full[50, 70].mean() == pytest.approx(ssim_at(original, edited, 50, 70), abs=1e-9)
    # Noise only where K is: the unchanged mask shows no inside change.
    assert metrics.mad_in == 0.0


def test_change_confined_to_mask_leaves_keep_metrics_untouched():
    original = gradient_image(W, H, 0)
    noisy = outside_noise(original)
    both = inside_change(noisy)
    mask, t = box_mask(), Thresholds()
    only_out, _ = measure(original, noisy, mask, t)
    with_in, _ = measure(original, both, mask, t)
    for name in ("mse_out", "psnr_out", "leak_share", "leak_boxes"):
        assert getattr(with_in, name) == getattr(only_out, name), name
    # scipy's running-sum filter rounds differently along a row, so SSIM agrees to 1e-12, not bit for bit.
    assert with_in.ssim_out == pytest.approx(only_out.ssim_out, abs=1e-12)
    assert with_in.mad_in > only_out.mad_in == 0.0


def test_leak_share_and_boxes():
    original = gradient_image(W, H, 0)
    edited = original.copy()
    edited[50:55, 70:77] = 255 - edited[50:55, 70:77]  # a 7x5 leak
    edited[8, 80] = 0 if original[8, 80].max() > 128 else 255  # a 1-pixel leak
    metrics, leaks = measure(original, edited, box_mask(), Thresholds())
    keep = brute_keep(box_mask(), 4, 4)
    changed = (np.abs(original.astype(int) - edited.astype(int)).max(-1) > 24) & keep
    assert metrics.leak_share == pytest.approx(changed.sum() / keep.sum())
    assert leaks.boxes[0] == [70, 50, 77, 55]
    assert leaks.boxes[1] == [80, 8, 81, 9]
    assert metrics.leak_count == 2


def test_verdict_fails_a_no_op_and_passes_a_confined_edit():
    original = gradient_image(W, H, 0)
    t = Thresholds()
    no_op, _ = measure(original, original.copy(), box_mask(), t)
    verdict = judge(no_op, t)
    assert verdict.verdict == "fail"
    assert any("too little change inside the mask" in r for r in verdict.reasons)
    assert verdict.label == "fail (without LPIPS)"
    good, _ = measure(original, inside_change(original), box_mask(), t)
    assert judge(good, t).verdict == "pass"


def test_noise_fails_defaults_and_spec_overrides_relax_them():
    original = gradient_image(W, H, 0)
    edited = inside_change(outside_noise(original, sigma=40))
    t = Thresholds()
    metrics, _ = measure(original, edited, box_mask(), t)
    reasons = judge(metrics, t).reasons
    assert any(r.startswith("SSIM outside the mask") for r in reasons)
    assert any("of the keep region changed" in r for r in reasons)
    relaxed = Thresholds.for_spec(Checks(ssim_out_min=0.0, psnr_out_min=0.0, leak_max=1.0).model_dump(), margin=6)
    assert relaxed.margin == 6 and relaxed.lpips_out_max == t.lpips_out_max
    metrics, _ = measure(original, edited, box_mask(), relaxed)
    assert judge(metrics, relaxed).verdict == "pass"


# ── LPIPS (random backbone: tests only) ────────────────────────────────────


@pytest.fixture(scope="module")
def random_lpips():
    """The real lpips package with a randomly initialised AlexNet; never reachable from the product."""
    import warnings

    import lpips
    import torch

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lpips.LPIPS(net="alex", pretrained=True, pnet_rand=True, spatial=True, verbose=False)


def test_lpips_map_equals_the_package_forward(random_lpips):
    import torch

    original = gradient_image(W, H, 0)
    edited = outside_noise(original, sigma=20)
    scorer = LpipsScorer(random_lpips, description="random backbone (test)")
    ours = scorer.distance_map(original, edited)
    to_t = lambda im: torch.tensor(im, dtype=torch.float32).permute(2, 0, 1)[None] / 255 * 2 - 1  # noqa: E731
    with torch.no_grad():
        theirs = random_lpips(to_t(original), to_t(edited))[0, 0].numpy()
    assert ours.shape == (H, W)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)
    # A second image against the same reference reuses its features and still matches.
    other = inside_change(original)
    with torch.no_grad():
        expected = random_lpips(to_t(original), to_t(other))[0, 0].numpy()
    np.testing.assert_allclose(scorer.distance_map(original, other), expected, rtol=1e-4, atol=1e-6)


def test_lpips_on_large_images_runs_at_the_working_size(random_lpips):
    import torch

    original = gradient_image(W, H, 0)
    edited = outside_noise(original, sigma=20)
    scorer = LpipsScorer(random_lpips, description="random backbone (test)", working_size=48)
    ours = scorer.distance_map(original, edited)
    small = lambda im: np.asarray(Image.fromarray(im).resize((48, 32), Image.Resampling.BOX))  # noqa: E731
    to_t = lambda im: torch.tensor(im, dtype=torch.float32).permute(2, 0, 1)[None] / 127.5 - 1  # noqa: E731
    with torch.no_grad():
        at_work = random_lpips(to_t(small(original)), to_t(small(edited)))
        expected = torch.nn.functional.interpolate(at_work, size=(H, W), mode="bilinear", align_corners=False)
    assert ours.shape == (H, W)
    np.testing.assert_allclose(ours, expected[0, 0].numpy(), rtol=1e-4, atol=1e-6)


def test_lpips_grows_with_noise_and_is_zero_for_identical(random_lpips):
    original = gradient_image(W, H, 0)
    scorer = LpipsScorer(random_lpips, description="random backbone (test)")
    t = Thresholds()
    same, _ = measure(original, original.copy(), box_mask(), t, scorer)
    assert same.lpips_out == pytest.approx(0.0, abs=1e-7) and same.lpips_in == pytest.approx(0.0, abs=1e-7)
    values = []
    for sigma in (4, 12, 36):
        metrics, _ = measure(original, outside_noise(original, sigma=sigma), box_mask(), t, scorer)
        values.append(metrics.lpips_out)
    assert values[0] < values[1] < values[2]
    changed, _ = measure(original, inside_change(original), box_mask(), t, scorer)
    assert changed.lpips_in > 0.01


def _save_random_backbone(path: Path) -> dict:
    import torch
    import torchvision

    torch.manual_seed(1)
    state = torchvision.models.alexnet(weights=None).state_dict()
    torch.save(state, path)
    return state


def test_backbone_layers_reach_lpips_without_download(tmp_path, monkeypatch):
    import torch
    import torchvision

    from cfkit.preserve.scorer import scorer_from_features
    from cfkit.weights.reading import read_alexnet_features

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    weights = tmp_path / "alexnet.pth"
    state = _save_random_backbone(weights)
    scorer = scorer_from_features(read_alexnet_features(weights, source="test"), description="random (test)")
    net = scorer.module.net
    reference = torchvision.models.alexnet(weights=None)
    reference.load_state_dict(state)
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        np.testing.assert_allclose(net.slice1(x).numpy(), reference.features[:2](x).numpy(), rtol=1e-5)
        np.testing.assert_allclose(net.slice5(net.slice4(net.slice3(net.slice2(net.slice1(x))))).numpy(),
                                   reference.features[:12](x).numpy(), rtol=1e-4, atol=1e-6)
    assert not (tmp_path / "torch-home").exists()  # nothing was fetched into the hub cache


def test_missing_cache_makes_lpips_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty"))
    monkeypatch.setenv("CFKIT_WEIGHTS_DIR", str(tmp_path / "empty-cfkit"))
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE", raising=False)
    loaded = load_lpips(None, None)
    assert loaded.scorer is None
    assert loaded.note.startswith("LPIPS unavailable") and "--lpips-weights" in loaded.note
    assert "cfkit weights import lpips" in loaded.note and "cfkit weights fetch lpips" in loaded.note


def test_bad_backbone_files_are_input_errors(tmp_path):
    import torch

    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="not a readable weights file"):
        load_lpips(None, garbage)
    wrong = tmp_path / "wrong.pth"
    torch.save({"features.0.weight": torch.zeros(2, 2)}, wrong)
    with pytest.raises(ConfigError, match="does not hold AlexNet's feature layers"):
        load_lpips(None, wrong)
    with pytest.raises(ConfigError, match="not found"):
        load_lpips(None, tmp_path / "absent.pth")


# ── stored checks and the CLI ──────────────────────────────────────────────


@pytest.fixture
def no_lpips(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no-torch-cache"))
    monkeypatch.setenv("CFKIT_WEIGHTS_DIR", str(tmp_path / "no-cfkit-weights"))
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE", raising=False)


def test_check_edit_stores_both_variants(tiny_ws, random_lpips):
    original = tiny_original(tiny_ws)
    edit_id = add_edit(tiny_ws, "TX01", inside_change(original), raw=outside_noise(inside_change(original), 40))
    ws = load_workspace(tiny_ws)
    scorer = LpipsScorer(random_lpips, description="random backbone (test)")
    with Store(ws.db_path) as store:
        results = check_edit(ws, store, edit_id, scorer=scorer)
        rows = [r for r in table_rows(store.path, "checks", "edit_id, variant, verdict, lpips, metrics")
                if r["edit_id"] == edit_id]
    assert [r.variant for r in results] == ["raw", "composite"]
    by_variant = {r["variant"]: r for r in rows}
    assert by_variant["composite"]["lpips"] == 1
    assert json.loads(by_variant["composite"]["metrics"])["ssim_out"] == pytest.approx(1.0, abs=1e-12)
    assert by_variant["raw"]["verdict"] == "fail"


def test_cli_without_weights_says_unavailable_and_shows_no_number(tiny_ws, no_lpips):
    original = tiny_original(tiny_ws)
    add_edit(tiny_ws, "TX01", inside_change(original))
    result = run_cli(["check", "TX01", "-w", str(tiny_ws), "--json"])
    assert result.exit_code == 0, result.stderr
    assert "LPIPS unavailable" in result.stderr
    [row] = json.loads(result.stdout)
    assert row["metrics"]["lpips_out"] is None and row["metrics"]["lpips_in"] is None
    assert row["label"] == "pass (without LPIPS)" and row["lpips_measured"] is False
    table = run_cli(["check", "TX01", "-w", str(tiny_ws)])
    assert "LPIPS unavailable" in table.stderr
    [line] = [line for line in table.stdout.splitlines() if "composite" in line]
    assert line.split()[5:7] == ["n/a", "n/a"]  # the LPIPS and LPIPS-in cells
    assert line.split()[-1] == "pass*" and "* verdict decided without LPIPS" in table.stdout
    listing = run_cli(["specs", "list", "-w", str(tiny_ws), "--json"])
    assert json.loads(listing.stdout)["specs"][0]["check"] == "pass (without LPIPS)"


def test_cli_failed_check_exits_1_and_lists_reasons(tiny_ws, no_lpips):
    add_edit(tiny_ws, "TX01", tiny_original(tiny_ws))  # a no-op "edit"
    result = run_cli(["check", "--all", "-w", str(tiny_ws)])
    assert result.exit_code == 1
    assert "too little change inside the mask" in result.stderr
    assert ("1 of 1 edit failed the preservation check (TX01); see the reasons above, then re-edit or review it."
            in " ".join(result.stderr.split()))
    assert "Traceback" not in result.stderr


def test_cli_two_failed_checks_are_said_in_the_plural(tiny_ws, no_lpips):
    spec = (tiny_ws / "interventions" / "TX01.yaml").read_text()
    (tiny_ws / "interventions" / "TX02.yaml").write_text(spec.replace("id: TX01", "id: TX02"))
    for spec_id in ("TX01", "TX02"):
        add_edit(tiny_ws, spec_id, tiny_original(tiny_ws))  # no-op "edits"
    result = run_cli(["check", "--all", "-w", str(tiny_ws)])
    assert result.exit_code == 1
    assert ("2 of 2 edits failed the preservation check (TX01, TX02); see the reasons above, then re-edit or review "
            "them.") in " ".join(result.stderr.split())


def test_cli_user_errors_exit_2_in_one_line(tiny_ws, tmp_path, no_lpips):
    ws = str(tiny_ws)
    assert run_cli(["check", "TX01", "-w", ws]).exit_code == 2  # no edit yet
    edit_id = add_edit(tiny_ws, "TX01", tiny_original(tiny_ws))
    (load_workspace(tiny_ws).store_dir / "edits" / "TX01" / f"{edit_id}-composite.png").unlink()
    missing = run_cli(["check", "TX01", "-w", ws])
    assert missing.exit_code == 2 and "is not there any more" in missing.stderr and "cfkit edit TX01" in missing.stderr
    add_edit(tiny_ws, "TX01", tiny_original(tiny_ws))
    garbage = tmp_path / "bad.pth"
    garbage.write_bytes(b"\x00" * 10)
    bad = run_cli(["check", "TX01", "-w", ws, "--lpips-weights", str(garbage)])
    assert bad.exit_code == 2 and "not a readable weights file" in bad.stderr
    assert run_cli(["check", "-w", ws]).exit_code == 2
    for result in (missing, bad):
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_failed_edit_row_is_refused(tiny_ws, no_lpips):
    edit_id = add_edit(tiny_ws, "TX01", tiny_original(tiny_ws), status="failed")
    result = run_cli(["check", "--edit", str(edit_id), "-w", str(tiny_ws)])
    assert result.exit_code == 2 and "nothing to check" in result.stderr
    assert table_rows(load_workspace(tiny_ws).db_path, "checks") == []


def test_backbone_path_comes_from_option_env_then_config(tiny_ws, tmp_path, monkeypatch):
    from cfkit.weights.lpips import backbone_candidates
    from cfkit.weights.lpips import find_backbone

    monkeypatch.setenv("CFKIT_WEIGHTS_DIR", str(tmp_path / "cfkit-weights"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch-home"))
    config = tiny_ws / "cfkit.toml"
    config.write_text(config.read_text() + '\n[check]\nlpips_backbone = "weights/alexnet.pth"\nmargin = 6\n')
    ws = load_workspace(tiny_ws)
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE", raising=False)
    defaults = [(tmp_path / "cfkit-weights" / "alexnet-owt-7be5be79.pth", "cfkit weights cache"),
                (tmp_path / "cfkit-weights" / "lpips-alexnet-features.pth", "cfkit weights cache"),
                (tmp_path / "torch-home" / "hub" / "checkpoints" / "alexnet-owt-7be5be79.pth", "torch hub cache")]
    places = lambda explicit=None: [(c.path, c.source) for c in backbone_candidates(ws, explicit)]  # noqa: E731
    assert places() == [(tiny_ws.resolve() / "weights" / "alexnet.pth", "[check] lpips_backbone in cfkit.toml"),
                        *defaults]
    monkeypatch.setenv("CFKIT_LPIPS_BACKBONE", str(tmp_path / "env.pth"))
    assert places() == [(tmp_path / "env.pth", "CFKIT_LPIPS_BACKBONE"), *defaults]
    assert places(tmp_path / "opt.pth") == [(tmp_path / "opt.pth", "--lpips-weights"), *defaults]
    # A named file that is missing is an error, not a silent "unavailable" nor a fall-through.
    with pytest.raises(ConfigError, match="CFKIT_LPIPS_BACKBONE: LPIPS backbone weights .* not found"):
        load_lpips(ws, None)
    # Unnamed places are taken in order: cfkit's cache before torch's.
    monkeypatch.delenv("CFKIT_LPIPS_BACKBONE")
    for path, _ in defaults:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    assert find_backbone(None, None).path == defaults[0][0]
    defaults[0][0].unlink()
    assert find_backbone(None, None).path == defaults[1][0]
    assert Thresholds.for_spec(None, margin=ws.config.check.margin).margin == 6


def test_a_random_backbone_from_env_is_refused_by_check(tiny_ws, tmp_path, monkeypatch):
    weights = tmp_path / "alexnet-random.pth"
    _save_random_backbone(weights)
    monkeypatch.setenv("CFKIT_WEIGHTS_DIR", str(tmp_path / "cfkit-weights"))
    monkeypatch.setenv("CFKIT_LPIPS_BACKBONE", str(weights))
    add_edit(tiny_ws, "TX01", inside_change(tiny_original(tiny_ws)))
    result = run_cli(["check", "TX01", "--json", "-w", str(tiny_ws)])
    assert result.exit_code == 2 and result.stdout == ""
    assert "CFKIT_LPIPS_BACKBONE: " in result.stderr and "is not AlexNet's ImageNet backbone" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
