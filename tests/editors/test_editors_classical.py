"""The classical engine: biharmonic remove, Lab recolor, feathered paste; deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from skimage.color import rgb2lab

from cfkit.editors import EditRequest, load_editor
from cfkit.editors.classical import ClassicalEditor, ClassicalOptions
from cfkit.errors import InputError, SpecError
from support.workspace import gradient_image


def _box_mask(height=64, width=96, box=(16, 32, 24, 48)) -> np.ndarray:
    top, bottom, left, right = box
    mask = np.zeros((height, width), np.uint8)
    mask[top:bottom, left:right] = 255
    return mask


def _request(image, mask, files=None) -> EditRequest:
    return EditRequest(spec_id="TX01", prompt="p", image=image, mask=mask, files=files, root=files)


def Classical(**options) -> ClassicalEditor:  # noqa: N802 - reads like the spec's `classical:` table
    return ClassicalEditor(ClassicalOptions(**options))


def _far_from(mask: np.ndarray, px: int) -> np.ndarray:
    from scipy.ndimage import distance_transform_edt

    return distance_transform_edt(mask == 0) > px


def test_registered_under_its_name_and_configured_through_its_options():
    editor = load_editor("classical", {"op": "recolor", "color": "#102030", "feather": "2.5"})
    assert isinstance(editor, ClassicalEditor)
    assert editor.options == ClassicalOptions(op="recolor", color="#102030", feather=2.5)


@pytest.mark.parametrize("options, message", [
    ({"op": "recolor"}, "recolor needs 'color'"),
    ({"op": "paste"}, "paste needs 'asset'"),
    ({"op": "blur"}, "op=blur"),
    ({"op": "remove", "feather": "1e7"}, "feather=1e7"),  # an unbounded feather would hang the blur
    ({"op": "remove", "radius": "3"}, "no option 'radius'"),
])
def test_bad_options_are_refused_naming_the_value(options, message):
    with pytest.raises(InputError, match=message):
        load_editor("classical", options)


def test_remove_continues_a_smooth_gradient_into_the_hole():
    # A linear ramp is biharmonic, so inpainting it should give the ramp back.
    y, x = np.mgrid[0:64, 0:96]
    ramp = np.stack([x * 2.0, y * 3.0, 100 + x + y], axis=-1).astype(np.uint8)
    image = ramp.copy()
    mask = _box_mask()
    image[mask > 0] = (255, 0, 255)  # the "cue" to remove
    out = Classical(op="remove").edit(_request(image, mask)).images[0]
    inside = mask > 0
    assert np.abs(out[inside].astype(int) - ramp[inside].astype(int)).max() <= 2
    assert np.array_equal(out[~inside], image[~inside])


def test_recolor_moves_chroma_to_the_target_and_keeps_shading():
    image = gradient_image(96, 64, 3)
    mask = _box_mask()
    target = "#3060c0"
    out = Classical(op="recolor", color=target, feather=2).edit(_request(image, mask)).images[0]
    lab_in, lab_out = rgb2lab(image / 255.0), rgb2lab(out / 255.0)
    target_lab = rgb2lab(np.array([[[0x30, 0x60, 0xC0]]]) / 255.0)[0, 0]
    inside = mask > 0
    # Chroma lands on the target's (tolerance: 8-bit rounding and gamut clipping, 3 Lab units).
    assert np.allclose(lab_out[inside][:, 1:].mean(axis=0), target_lab[1:], atol=3.0)
    # Lightness: shifted by one constant, so the region's shading pattern survives.
    shift = lab_out[inside][:, 0] - lab_in[inside][:, 0]
    assert abs(shift.mean() - (target_lab[0] - lab_in[inside][:, 0].mean())) < 1.5
    assert shift.std() < 1.0
    assert np.array_equal(out[_far_from(mask, 6)], image[_far_from(mask, 6)])


def test_recolor_strength_zero_keeps_the_image():
    image = gradient_image(96, 64, 4)
    out = Classical(op="recolor", color="#ff0000", strength=0.0).edit(_request(image, _box_mask())).images[0]
    assert np.abs(out.astype(int) - image.astype(int)).max() <= 1


def test_paste_places_the_asset_over_the_mask_box(tmp_path):
    asset = np.zeros((10, 20, 4), np.uint8)
    asset[..., :3] = (10, 200, 30)
    asset[..., 3] = 255
    asset[:, :5, 3] = 0  # a transparent left strip shows the source through
    path = tmp_path / "flower.png"
    Image.fromarray(asset, "RGBA").save(path)
    image = gradient_image(96, 64, 5)
    mask = _box_mask()  # rows 16..32, cols 24..48
    out = Classical(op="paste", asset="flower.png", feather=0).edit(_request(image, mask, tmp_path)).images[0]
    assert (out[18:30, 34:46] == (10, 200, 30)).all()
    # The alpha-0 strip (5 of 20 px → 6 of 24) keeps the source, away from resampling at its edge.
    assert np.array_equal(out[16:32, 24:27], image[16:32, 24:27])
    assert np.array_equal(out[~(mask > 0)], image[~(mask > 0)])


def test_paste_refuses_a_non_png_asset(tmp_path):
    path = tmp_path / "flower.jpg"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(path, format="JPEG")
    request = _request(gradient_image(), _box_mask(), tmp_path)
    with pytest.raises(SpecError, match=r"JPEG file; paste assets must be PNG"):
        Classical(op="paste", asset="flower.jpg").edit(request)


def test_paste_refuses_an_asset_outside_the_workspace(tmp_path):
    inside = tmp_path / "ws"
    inside.mkdir()
    Image.fromarray(np.zeros((8, 8, 4), np.uint8), "RGBA").save(tmp_path / "outside.png")
    with pytest.raises(SpecError, match="points outside the workspace"):
        Classical(op="paste", asset="../outside.png").edit(_request(gradient_image(), _box_mask(), inside))


def test_the_same_inputs_give_the_same_output():
    image, mask = gradient_image(96, 64, 6), _box_mask()
    for options in ({"op": "remove"}, {"op": "recolor", "color": "#20a040"}):
        first = Classical(**options).edit(_request(image, mask)).images[0]
        second = Classical(**options).edit(_request(image, mask)).images[0]
        assert first.tobytes() == second.tobytes()


def test_without_an_operation_it_is_refused():
    with pytest.raises(SpecError, match="gives the classical engine no operation"):
        Classical().edit(_request(gradient_image(), _box_mask()))
