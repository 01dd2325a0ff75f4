"""The graded task set (loadtest/prompts/graded.jsonl): prompts with one checkable answer each.

    python -m loadtest.workload.graded [--tried] > loadtest/prompts/graded.jsonl

Each line is a task of `--workload structured`'s format with an `answer` instead of a
constraint ({"id": "capital-03", "prompt": "...", "answer": "Paris"}), graded by
loadtest/workload/answers.py. TRIED holds every kind tried on SmolLM2-135M-Instruct
(servers/smollm2.py), greedy, alone (`--tried` writes them: evidence/2026-11-28/smollm2-cpu/);
KINDS, the ones shipped, are those it answered right every time: a number taken out of a
sentence (an order, invoice, flight, account or page number) and the capitals it knows. Copying,
capital letters, names, cities, email addresses, the next day or number and sums it got wrong
too often to be told apart from an engine's fault, so a score that falls under load or with a
flag is the engine's doing, not the model's. The same seed writes the same file
(tests/test_graded.py checks the shipped one).
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Iterator

__all__ = ["KINDS", "PER_KIND", "SEED", "TRIED", "TRIED_PER_KIND", "graded_tasks"]

SEED = 52
PER_KIND = 50  # tasks of each shipped kind (a lookup kind has as many as it has facts)
TRIED_PER_KIND = 30  # of each kind tried (the measurement's input)
ONLY = " Reply with {} only."

NAMES = ["Anna", "Ben", "Carlos", "Dana", "Emma", "Felix", "Grace", "Hugo", "Iris", "Jack", "Kara",
         "Leo", "Maya", "Nora", "Omar", "Paul", "Rosa", "Sam", "Tara", "Victor"]
CITIES = ["Berlin", "Madrid", "Tokyo", "Chicago", "Toronto", "Sydney", "Cairo", "Lisbon", "Dublin",
          "Boston", "Vienna", "Oslo", "Denver", "Seattle", "Prague", "Athens"]
THINGS = ["bicycle", "laptop", "guitar", "lamp", "camera", "kettle", "backpack", "jacket", "watch",
          "printer"]
WORDS = ["apple", "river", "garden", "window", "yellow", "planet", "silver", "pencil", "button",
         "rocket", "forest", "candle", "orange", "bridge", "pocket", "turtle", "castle", "winter",
         "mirror", "ladder", "basket", "dragon", "violin", "tomato"]
CAPITALS = {"France": "Paris", "Italy": "Rome", "Japan": "Tokyo", "Germany": "Berlin",
            "Spain": "Madrid", "England": "London", "Russia": "Moscow", "China": "Beijing",
            "Egypt": "Cairo", "Greece": "Athens", "Portugal": "Lisbon", "Ireland": "Dublin",
            "Austria": "Vienna", "Norway": "Oslo", "Sweden": "Stockholm", "Poland": "Warsaw",
            "Canada": "Ottawa", "Argentina": "Buenos Aires", "Netherlands": "Amsterdam",
            "Belgium": "Brussels", "Denmark": "Copenhagen", "Finland": "Helsinki",
            "Turkey": "Ankara", "India": "New Delhi", "South Korea": "Seoul", "Thailand": "Bangkok",
            "Kenya": "Nairobi", "Peru": "Lima", "Cuba": "Havana", "Hungary": "Budapest",
            "Australia": "Canberra", "Scotland": "Edinburgh"}
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]

Task = tuple[str, str]  # (prompt, answer)


def _copy_word(rng: random.Random) -> Task:
    word = rng.choice(WORDS)
    return f"Repeat the word {word}." + ONLY.format("the word"), word


def _copy_code(rng: random.Random) -> Task:
    code = f"{rng.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}{rng.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}-{rng.randrange(1000, 10000)}"
    return f"Repeat the code {code}." + ONLY.format("the code"), code


def _upper(rng: random.Random) -> Task:
    word = rng.choice(WORDS)
    return f"Write the word {word} in capital letters." + ONLY.format("the word"), word.upper()


def _extract_name(rng: random.Random) -> Task:
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    return f"{name} bought a new {thing} yesterday. Who bought the {thing}?" + ONLY.format("the name"), name


def _extract_city(rng: random.Random) -> Task:
    name, city = rng.choice(NAMES), rng.choice(CITIES)
    return (f"My name is {name} and I live in {city}. In which city do I live?"
            + ONLY.format("the city"), city)


def _extract_email(rng: random.Random) -> Task:
    name = rng.choice(NAMES)
    address = f"{name.lower()}.{rng.choice(WORDS)}@example.com"
    return (f"For help, write to {address} before Friday. What is the email address?"
            + ONLY.format("the email address"), address)


# Numbers taken out of a sentence: the kind this model answered right every time alone
NUMBER_SENTENCES = {
    "order": ("Order {n} was shipped to {name} on Monday.", "What is the order number?"),
    "invoice": ("Invoice {n} from {city} is due on Friday.", "What is the invoice number?"),
    "room": ("{name}'s meeting is in room {n} at ten o'clock.", "Which room is the meeting in?"),
    "flight": ("Flight {n} to {city} leaves at noon.", "What is the flight number?"),
    "ticket": ("Support ticket {n} was opened by {name}.", "What is the ticket number?"),
    "account": ("The account number of {name} is {n}.", "What is the account number?"),
    "price": ("The {thing} costs {n} dollars.", "How many dollars does the {thing} cost?"),
    "year": ("{name} moved to {city} in {year}.", "In which year did {name} move to {city}?"),
    "page": ("The chapter about the {thing} starts on page {n}.", "On which page does it start?"),
    "distance": ("{city} is {n} kilometers away.", "How many kilometers away is {city}?"),
}


def _number_in(sentence: str, question: str) -> Callable[[random.Random], Task]:
    def make(rng: random.Random) -> Task:
        n, year = str(rng.randrange(100, 100000)), str(rng.randrange(1950, 2021))
        slots = {"n": n, "year": year, "name": rng.choice(NAMES), "city": rng.choice(CITIES),
                 "thing": rng.choice(THINGS)}
        answer = year if "{year}" in sentence else n
        return f"{sentence} {question}".format(**slots) + ONLY.format("the number"), answer
    return make


# answered wrong alone: Istanbul for Turkey, a description for Belgium and Denmark, "Lisbon, not
# Portugal" for Portugal
MISSED_CAPITALS = {"Belgium", "Denmark", "Turkey", "Portugal"}


def _capital_of(countries: list[str]) -> Callable[[random.Random], Task]:
    def make(rng: random.Random) -> Task:
        country = rng.choice(countries)
        return f"What is the capital of {country}?" + ONLY.format("the city"), CAPITALS[country]
    return make


def _next_day(rng: random.Random) -> Task:
    at = rng.randrange(len(DAYS))
    return f"Which day comes after {DAYS[at]}?" + ONLY.format("the day"), DAYS[(at + 1) % len(DAYS)]


def _next_month(rng: random.Random) -> Task:
    at = rng.randrange(len(MONTHS))
    return (f"Which month comes after {MONTHS[at]}?" + ONLY.format("the month"),
            MONTHS[(at + 1) % len(MONTHS)])


def _next_number(rng: random.Random) -> Task:
    number = rng.randrange(1, 99)
    return f"Which number comes after {number}?" + ONLY.format("the number"), str(number + 1)


def _sum(rng: random.Random) -> Task:
    a, b = rng.randrange(1, 10), rng.randrange(1, 10)
    return f"What is {a} plus {b}?" + ONLY.format("the number"), str(a + b)


def _first_word(rng: random.Random) -> Task:
    words = rng.sample(WORDS, 4)
    return (f"What is the first word of this list: {', '.join(words)}?" + ONLY.format("the word"),
            words[0])


# Every kind tried (`--tried` writes them all: the measurement's input) and those shipped
TRIED: dict[str, Callable[[random.Random], Task]] = {
    "copy-word": _copy_word, "copy-code": _copy_code, "upper": _upper,
    "extract-name": _extract_name, "extract-city": _extract_city, "extract-email": _extract_email,
    "capital": _capital_of(sorted(CAPITALS)), "next-day": _next_day, "next-month": _next_month,
    "next-number": _next_number, "sum": _sum, "first-word": _first_word,
    **{f"number-{name}": _number_in(*parts) for name, parts in NUMBER_SENTENCES.items()},
}
# Those answered right every time alone (capitals: the countries it knew)
KINDS = {"capital": _capital_of(sorted(set(CAPITALS) - MISSED_CAPITALS)),
         **{f"number-{name}": TRIED[f"number-{name}"]
            for name in ("order", "invoice", "flight", "account", "page")}}


def graded_tasks(kinds: dict[str, Callable[[random.Random], Task]] = KINDS, per_kind: int = PER_KIND,
                 seed: int = SEED) -> Iterator[dict[str, str]]:
    """`per_kind` distinct tasks of each kind, kinds interleaved (a short run samples them all)."""
    made: dict[str, list[Task]] = {}
    for name, make in kinds.items():
        rng, seen = random.Random(f"{seed}-{name}"), set[str]()
        tasks = made.setdefault(name, [])
        for _ in range(per_kind * 50):
            if len(tasks) == per_kind:
                break
            prompt, answer = make(rng)
            if prompt not in seen:
                seen.add(prompt)
                tasks.append((prompt, answer))
    for number in range(per_kind):
        for name, tasks in made.items():
            if number < len(tasks):
                prompt, answer = tasks[number]
                yield {"id": f"{name}-{number:02d}", "prompt": prompt, "answer": answer}


def main(argv: list[str]) -> int:
    if argv not in ([], ["--tried"]):
        print("error: python -m loadtest.workload.graded [--tried]", file=sys.stderr)
        return 2
    for task in graded_tasks(TRIED, TRIED_PER_KIND) if argv else graded_tasks():
        sys.stdout.write(json.dumps(task) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
