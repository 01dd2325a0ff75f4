"""A configuration's options in a report cell: a flag given many times shortened, the rest as given.

No engine needed: these run in seconds.
"""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from loadtest.report.options import options_cell, short_options, shown_options

ADAPTERS = " ".join(f"--lora /tmp/lm/adapters/lora{i}.gguf" for i in range(16))


def test_sixteen_adapters_show_the_first_the_last_and_how_many() -> None:
    flags = f"--cpus 1 --lora-init-without-apply {ADAPTERS}"
    assert short_options(flags) == ("--cpus 1 --lora-init-without-apply "
                                    "--lora ×16 (/tmp/lm/adapters/lora0.gguf … lora15.gguf)")
    modules = " ".join(f"a{i}=/m/a{i}" for i in range(16))
    assert short_options(f"--enable-lora --lora-modules {modules} --max-loras 4") == (
        "--enable-lora --lora-modules ×16 (a0=/m/a0 … a15=…/a15) --max-loras 4")
    assert short_options(f"EXTRA_ARGS=--lora-modules {modules} SHARDS=2") == (
        "EXTRA_ARGS=--lora-modules ×16 (a0=/m/a0 … a15=…/a15) SHARDS=2")


def test_a_flag_given_twice_beside_a_shortened_one_keeps_its_own_flags() -> None:
    flags = f"{ADAPTERS} --control-vector /a.gguf --control-vector /b.gguf"
    assert short_options(flags).endswith("--control-vector /a.gguf --control-vector /b.gguf")


def test_the_cell_is_in_backticks_and_empty_flags_are_the_defaults() -> None:
    assert options_cell("--max-num-seqs=256") == "`--max-num-seqs=256`"
    assert options_cell("") == "(defaults)"
    assert options_cell('--chat-template "unbalanced') == '`--chat-template "unbalanced`'


_values = st.text(alphabet="abc/=._0123456789", min_size=1, max_size=12).filter(
    lambda v: not v.startswith("-"))
_flag = st.sampled_from(["--lora", "--lora-modules", "-n", "--cpus", "SHARDS=2"])


@given(st.lists(st.tuples(_flag, st.lists(_values, max_size=4)), max_size=6))
def test_options_never_grow_and_keep_every_flag_and_few_values_as_given(
        parts: list[tuple[str, list[str]]]) -> None:
    flags = shlex.join([token for flag, values in parts for token in (flag, *values)])
    shown = short_options(flags)
    tokens = shlex.split(flags)
    for flag in {flag for flag, _ in parts}:
        assert flag in shown
    if len(shown) > len(flags):  # only where a long list became first … last (count)
        assert "×" in shown
    if "×" not in shown:
        assert shown == flags
    else:
        assert set(shown.replace("(", " ").replace(")", " ").split()) - {"…"} <= {
            *tokens, *(f"×{n}" for n in range(3, 30)), *(t.rsplit("/", 1)[-1] for t in tokens),
            *(f"{t.partition('=')[0]}=…/{t.rsplit('/', 1)[-1]}" for t in tokens)}



def test_options_that_would_read_alike_in_one_table_are_shown_whole() -> None:
    two = {c: f"--lora /m/first.gguf --lora /m/{c}.gguf --lora /m/last.gguf" for c in "xy"}
    many = f"--cpus 1 {ADAPTERS}"
    shown = shown_options([*two.values(), many, many, ""])
    assert shown == {two["x"]: two["x"], two["y"]: two["y"], many: short_options(many), "": ""}
