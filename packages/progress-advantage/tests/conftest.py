import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def micro():
    """Two micro models (different random weights) sharing one tokenizer."""
    from paperstack import tiny

    tok = tiny.build_tokenizer()
    return tiny.build_model("micro", tok, 0), tiny.build_model("micro", tok, 1), tok
