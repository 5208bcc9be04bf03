import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def model_dir(lm, tmp_path_factory):
    """The test module's ``lm`` (model, tokenizer) saved to a folder the CLI can load."""
    model, tokenizer = lm
    path = tmp_path_factory.mktemp("lm")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
