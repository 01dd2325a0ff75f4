"""greedy answers of a tasks file with transformers, batched: python gen.py MODEL_DIR TASKS OUT"""
import json, sys, time, torch
torch.set_num_threads(1)
from transformers import AutoModelForCausalLM, AutoTokenizer
model_dir, tasks_path, out = sys.argv[1:4]
tok = AutoTokenizer.from_pretrained(model_dir); tok.padding_side = "left"
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
tasks = [json.loads(l) for l in open(tasks_path)]
answers = {}
t = time.time()
for i in range(0, len(tasks), 16):
    batch = tasks[i:i+16]
    texts = [tok.apply_chat_template([{"role": "user", "content": x["prompt"]}], add_generation_prompt=True, tokenize=False) for x in batch]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        gen = model.generate(**enc, max_new_tokens=24, do_sample=False, pad_token_id=tok.pad_token_id)
    for x, row in zip(batch, gen[:, enc["input_ids"].shape[1]:]):
        answers[x["id"]] = tok.decode(row, skip_special_tokens=True)
    print(i, time.time() - t, file=sys.stderr)
json.dump(answers, open(out, "w"), indent=0)
