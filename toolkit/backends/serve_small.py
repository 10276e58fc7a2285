"""``transformers serve`` for the kit's int8 build: the same server, with the int8 artifact loaded by ``toolkit.small``.

What it does
- ``python -m toolkit.backends.serve_small ARGS`` runs ``transformers serve ARGS`` (its OpenAI-compatible routes,
  tool-call parsing, streaming and generation are transformers' own) in a process where one method is replaced:
  ``ModelManager._load_model``, for a model id that is an int8 artifact folder (:func:`is_int8_folder`), checks the
  artifact (``small.verify``) and returns ``small.load``'s model with the folder's generation config. Any other model
  id loads as ``transformers serve`` loads it. The artifact named first on the command line (the model the server
  preloads) is checked before the server starts: a bad one is one ``ArtifactError:`` line and exit status 2. ``transformers serve`` cannot load the artifact by itself: it builds
  the class named in ``config.json`` from ``model.safetensors``, and the artifact is int8 rows and scales in
  ``model.int8.safetensors`` that only ``toolkit.small`` reads.
- :func:`is_int8_folder` tells the kit's server launcher (``toolkit.backends.serve``) which command to start.

What it leaves out
- vLLM (it cannot load the artifact either); ``--quantization`` (bitsandbytes: a build the kit has not measured);
  a transformers version whose ``ModelManager`` has no ``_load_model`` (one line saying so, exit status 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

from toolkit import small


def is_int8_folder(path) -> bool:
    """Whether ``path`` is a folder holding the kit's int8 artifact (its manifest and its weights file)."""
    p = Path(str(path))
    return (p / small.MANIFEST).is_file() and (p / small.WEIGHTS).is_file()


def load_int8(folder: str):
    """The int8 build in ``folder``, checked first, with the generation config ``transformers serve`` reads."""
    from transformers import GenerationConfig  # lazy: only in the server process

    small.verify(Path(folder))
    model = small.load(Path(folder), transformers_class=True)  # the server calls transformers' generate and more
    model.generation_config = GenerationConfig.from_pretrained(folder)
    return model


def main(argv: list[str]) -> int:
    if argv and is_int8_folder(argv[0]):  # checked before the server starts: a bad artifact is one line, not a 500
        try:
            small.verify(Path(argv[0]))
        except small.ArtifactError as e:
            print(f"ArtifactError: {argv[0]}: {e}", file=sys.stderr)
            return 2
    from transformers.cli.serving import model_manager  # lazy: transformers serve's modules, in the server only
    from transformers.cli.serving.utils import split_revision  # lazy: as above
    from transformers.cli.transformers import app  # lazy: as above

    manager = model_manager.ModelManager
    original = getattr(manager, "_load_model", None)
    if original is None:
        print(
            "this transformers version's serve has no ModelManager._load_model: serve the float model", file=sys.stderr
        )
        return 2

    def _load_model(self, model_id_and_revision, *args, **kwargs):
        model_id, _ = split_revision(model_id_and_revision)
        if is_int8_folder(model_id):
            return load_int8(model_id)
        return original(self, model_id_and_revision, *args, **kwargs)

    manager._load_model = _load_model
    sys.argv = ["transformers", "serve", *argv]
    app()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
