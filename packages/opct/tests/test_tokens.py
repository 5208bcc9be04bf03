"""Any checkpoint's tokenizer made fit for OPCT: EOS padding, the core's fallback template, and
answers cut where a base model starts the next user turn."""

from opct.tokens import ready_tokenizer
from transformers import AutoTokenizer

from paperstack.llm import FALLBACK_CHAT_TEMPLATE, cut_fallback_turn
from paperstack.testing import zoo


def test_gpt2_gets_eos_padding_and_the_fallback_template():
    tok = AutoTokenizer.from_pretrained(zoo.checkpoint("gpt2"))
    assert tok.pad_token is None
    assert not tok.chat_template
    assert ready_tokenizer(tok) is tok
    assert tok.pad_token == tok.eos_token
    assert tok.chat_template == FALLBACK_CHAT_TEMPLATE
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is 7+4?"}], add_generation_prompt=True, tokenize=False
    )
    assert text == "User: What is 7+4?\nAssistant:"
    assert cut_fallback_turn(" 11.\nUser: and 8+1?", tok) == " 11."


def test_mistral_keeps_its_template_and_pads_with_eos():
    tok = AutoTokenizer.from_pretrained(zoo.checkpoint("mistral"))
    template = tok.chat_template
    ready_tokenizer(tok)
    assert tok.pad_token == tok.eos_token
    assert tok.chat_template == template
    assert cut_fallback_turn("a\nUser: b", tok) == "a\nUser: b"  # its own template: untouched
