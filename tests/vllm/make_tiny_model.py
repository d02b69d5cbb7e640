"""A tiny Llama with random weights and a byte-level BPE tokenizer, made here: no model hub is
reachable, and a serving test needs only a real architecture, not a good model.

    python make_tiny_model.py DIR

Hidden 128, intermediate 256, 2 layers, 4 heads, float32 (about 5.5 MB); the tokenizer is
trained on text this machine already has (Python's own sources), 4,096 tokens, with <s>, </s>,
<pad> and a minimal chat template. Seeded: the same folder every time.
"""

import pathlib
import sys
import sysconfig

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VOCAB = 4096
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def corpus():
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py"))[:200]:
        yield path.read_text(errors="replace")


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        torch_dtype="float32",
    )
    LlamaForCausalLM(config).save_pretrained(out)


if __name__ == "__main__":
    main(sys.argv[1])
