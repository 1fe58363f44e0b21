"""A two-layer LLaVA (a CLIP vision tower and a Llama text model with a word-level tokenizer, random weights)
built from configs and saved to a local folder: the vision-language model the hf backend and the
``transformers serve`` tests run, with no hub access."""

from __future__ import annotations

from pathlib import Path

IMAGE_SIZE = 28
PATCH_SIZE = 14
#: The words a reply can be made of, after the special tokens.
WORDS = ['{"answer":', '"A",', '"B",', '"reason":', '"confidence":', '"low"}', "A", "B", "Yes", "No",
         "system:", "user:", "assistant:", "Question:", "Options:"]
SPECIAL = ("<pad>", "<s>", "</s>", "<unk>", "<image>")


def save_tiny_llava(folder: Path, *, chat_template: str, seed: int = 0, suppress_special: bool = False) -> Path:
    """Save the model, its processor and tokenizer to ``folder``; its weights drawn with ``seed``.

    With ``suppress_special`` the generation config never emits a special token, so every reply is
    ``max_tokens`` vocabulary words.
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration,
        LlavaProcessor, PreTrainedTokenizerFast,
    )

    vocab = {token: i for i, token in enumerate(SPECIAL)}
    for word in WORDS:
        vocab.setdefault(word, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", extra_special_tokens={"image_token": "<image>"})
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              image_size=IMAGE_SIZE, patch_size=PATCH_SIZE)
    text = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                       bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(LlavaConfig(vision_config=vision, text_config=text,
                                                      image_token_index=vocab["<image>"]))
    if suppress_special:
        model.generation_config.suppress_tokens = [vocab[t] for t in SPECIAL]
    model.save_pretrained(folder)
    LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE},
                                           crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}),
        tokenizer=fast, patch_size=PATCH_SIZE, vision_feature_select_strategy="default",
        chat_template=chat_template, num_additional_image_tokens=1,
    ).save_pretrained(folder)
    return folder


CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: "
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image> {% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)
