"""``tasks:chained``: 20 tasks that take chained or repeated tool calls, with checked answers.

Each task is a question about a small shop, its customers' orders, flights and the weather
(sum a cart's prices, the cheapest of ten flights, every order of a customer, ...); its
tools are plain functions over fixed data, and its answer is checked with
``ExpectAnswer(matches=...)`` (a number in any of its usual spellings, a name or an id).
Every task takes at least two calls, most of them five to ten, some chained (a cart's items,
then each item's price). The suite exists to compare plain tool calling with code mode
(``--tools own,code``, its default): the same cases, once with the tools called one turn at
a time, once behind ``tooldeck.code.CodeMode``'s ``run_code``.

``REFERENCE`` holds a program that solves each task (what a model in code mode would best
write); ``bench/code_mode_calls.py`` and the tests run it through the provider simulator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tooldeck.errors import ModelRetry
from tooldeck.eval.cases import EvalCase, ExpectAnswer
from tooldeck.messages import Message
from tooldeck.tools.function import tool
from tooldeck.tools.registry import ToolEntry

V = TypeVar("V")
SUITE = "tasks:chained"
CATEGORY = "chained"
INSTRUCTIONS = (
    "Answer the user's question with the tools; work out every figure from what they return. "
    "End with a short answer that states the result."
)

PRICES = {
    "apple": 0.5, "pear": 0.75, "banana": 0.25, "kiwi": 1.25, "mango": 2.5, "plum": 1.0,
    "fig": 3.0, "grape": 2.25, "lemon": 0.75, "lime": 0.5, "cherry": 4.0, "peach": 1.5,
}  # fmt: skip
STOCK = {
    "apple": 120, "pear": 0, "banana": 35, "kiwi": 0, "mango": 12, "plum": 40,
    "fig": 0, "grape": 7, "lemon": 60, "lime": 0, "cherry": 3, "peach": 18,
}  # fmt: skip
CARTS = {
    "C1": {"apple": 4, "pear": 2, "mango": 1, "fig": 2, "lime": 6},
    "C2": {"banana": 6, "kiwi": 2, "cherry": 1, "grape": 2, "plum": 3},
    "C3": {"peach": 2, "lemon": 4, "mango": 3, "apple": 10},
}
FARES = {
    ("PAR", "NYC"): dict(zip([f"AF1{n:02d}" for n in range(10)],
                             [612, 540, 498, 655, 530, 702, 519, 587, 476, 641], strict=True)),
    ("LON", "ROM"): dict(zip([f"BA2{n:02d}" for n in range(8)],
                             [189, 142, 215, 128, 176, 149, 230, 133], strict=True)),
    ("PAR", "BOS"): dict(zip([f"AF3{n:02d}" for n in range(6)],
                             [455, 498, 470, 520, 462, 510], strict=True)),
}  # fmt: skip
ORDERS = {  # id: (customer, total, status, items)
    "o101": ("ada", 42.0, "shipped", 3), "o102": ("ada", 17.5, "shipped", 1),
    "o103": ("ada", 60.0, "pending", 4), "o104": ("ada", 8.5, "shipped", 2),
    "o201": ("bob", 25.0, "shipped", 2), "o202": ("bob", 99.5, "pending", 5),
    "o203": ("bob", 12.0, "cancelled", 1), "o204": ("bob", 30.0, "shipped", 2),
    "o205": ("bob", 14.5, "pending", 1),
    "o301": ("carol", 5.0, "pending", 1), "o302": ("carol", 18.0, "pending", 2),
    "o303": ("carol", 33.0, "shipped", 3), "o304": ("carol", 7.5, "pending", 1),
    "o305": ("carol", 21.0, "shipped", 2), "o306": ("carol", 11.0, "pending", 1),
    "o401": ("dave", 54.0, "shipped", 2), "o402": ("dave", 88.5, "shipped", 6),
    "o403": ("dave", 19.0, "pending", 1),
    "o501": ("eve", 20.0, "shipped", 3), "o502": ("eve", 41.0, "shipped", 6),
    "o503": ("eve", 9.0, "pending", 2), "o504": ("eve", 26.5, "shipped", 4),
}  # fmt: skip
TEMPERATURES = {
    "Paris": 14.5, "Rome": 21.0, "Oslo": 3.5, "Madrid": 24.5,
    "Berlin": 11.0, "Lisbon": 22.5, "Vienna": 12.0, "Athens": 26.0,
}  # fmt: skip
RATES = {"USD": 1.25, "GBP": 0.75, "CHF": 1.0}


def _looked_up(kind: str, value: str, known: Mapping[str, V]) -> V:
    """``known[value]``; a value the data does not hold is refused, naming those it does
    (the model reads it)."""
    if value not in known:
        raise ModelRetry(f"no {kind} {value!r}; known: {', '.join(map(str, known))}")
    return known[value]


@tool
def price(item: str) -> float:
    """The price of one unit of an item, in euros."""
    return _looked_up("item", item, PRICES)


@tool
def stock(item: str) -> int:
    """How many units of an item are in stock."""
    return _looked_up("item", item, STOCK)


@tool
def cart(cart_id: str) -> dict[str, int]:
    """The items in a shopping cart: each item's name and the quantity wanted."""
    return dict(_looked_up("cart", cart_id, CARTS))


@tool
def flights(origin: str, destination: str) -> list[str]:
    """The ids of today's flights from one airport to another (IATA codes, e.g. PAR)."""
    route = (origin.upper(), destination.upper())
    if route not in FARES:
        known = ", ".join(f"{a}-{b}" for a, b in FARES)
        raise ModelRetry(f"no flights from {origin!r} to {destination!r}; known: {known}")
    return list(FARES[route])


@tool
def fare(flight: str) -> float:
    """The fare of a flight, in euros."""
    for fares in FARES.values():
        if flight in fares:
            return float(fares[flight])
    raise ModelRetry(f"no flight {flight!r}")


@tool
def orders_of(customer: str) -> list[str]:
    """The ids of every order a customer has placed."""
    placed = [order_id for order_id, row in ORDERS.items() if row[0] == customer.lower()]
    if not placed:
        raise ModelRetry(f"no customer {customer!r}")
    return placed


@tool
def order(order_id: str) -> dict[str, Any]:
    """One order: its id, total in euros, status (shipped, pending or cancelled) and how
    many items it holds."""
    _, total, status, items = _looked_up("order", order_id, ORDERS)
    return {"id": order_id, "total": total, "status": status, "items": items}


@tool
def temperature(city: str) -> float:
    """The temperature in a city right now, in degrees Celsius."""
    return _looked_up("city", city, TEMPERATURES)


@tool
def exchange_rate(currency: str) -> float:
    """How many units of a currency (USD, GBP, CHF) one euro buys."""
    return _looked_up("currency", currency.upper(), RATES)


def number(value: float) -> str:
    """A pattern finding ``value`` written as a number: ``15``, ``15.0``, ``15.00`` for 15;
    ``12.75`` (or ``12.750``) for 12.75; not inside a longer number."""
    whole, _, fraction = f"{value:.2f}".rstrip("0").rstrip(".").partition(".")
    decimals = rf"\.{fraction}0*" if fraction else r"(?:\.0+)?"
    return rf"(?<![\d.]){whole}{decimals}(?!\.?\d)"


def words(*wanted: str, unwanted: tuple[str, ...] = ()) -> str:
    """A pattern finding every word of ``wanted`` (any case, any order) and none of
    ``unwanted``."""
    ahead = "".join(rf"(?=.*\b{re.escape(word)}\b)" for word in wanted)
    absent = "".join(rf"(?!.*\b{re.escape(word)}\b)" for word in unwanted)
    return rf"(?is)^{absent}{ahead}"


def _others(right: str, among: Iterable[str]) -> tuple[str, ...]:
    """The wrong choices: an answer that lists every choice names none."""
    return tuple(choice for choice in among if choice != right)


@dataclass(frozen=True, slots=True)
class Task:
    """One task: its question, the tools it offers, the answer's pattern and a program that
    solves it."""

    id: str
    question: str
    tools: tuple[Callable[..., Any], ...]
    answer: str
    """A regular expression the answer must contain (``re.search``)."""
    program: str
    """A code-mode program whose last expression holds the answer."""


_CART_TOTAL = """items = await cart(cart_id="{cart}")
total = 0
for item, quantity in items.items():
    total += quantity * await price(item=item)
total"""
_CHEAPEST = """ids = await flights(origin="{origin}", destination="{destination}")
fares = {{f: await fare(flight=f) for f in ids}}
min(fares, key=lambda f: fares[f])"""
_SPENT = """sum([(await order(order_id=o))["total"] for o in await orders_of(customer="{who}")])"""
_OUT_OF_STOCK = """[i for i in await cart(cart_id="C1") if await stock(item=i) == 0]"""
FRUIT = ["apple", "pear", "banana", "kiwi", "mango", "plum", "fig", "grape", "lemon", "lime"]
WARM = ["Paris", "Rome", "Oslo", "Madrid", "Berlin", "Lisbon"]
COLD = ["Oslo", "Berlin", "Vienna", "Paris"]

TASKS: tuple[Task, ...] = (
    Task("cart_total_c1", "What do the items in cart C1 cost in total, in euros?",
         (cart, price), number(15.0), _CART_TOTAL.format(cart="C1")),
    Task("cart_total_c2", "How much will cart C2 cost altogether, in euros?",
         (cart, price), number(15.5), _CART_TOTAL.format(cart="C2")),
    Task("ten_prices", f"What does one each of {', '.join(FRUIT)} cost together, in euros?",
         (price,), number(12.75), f"sum([await price(item=i) for i in {FRUIT!r}])"),
    Task("cheapest_paris_nyc", "Which flight from PAR to NYC is the cheapest? Give its id.",
         (flights, fare), words("AF108", unwanted=_others("AF108", FARES[("PAR", "NYC")])),
         _CHEAPEST.format(origin="PAR", destination="NYC")),
    Task("dearest_london_rome", "Which flight from LON to ROM has the highest fare? Its id?",
         (flights, fare), words("BA206", unwanted=_others("BA206", FARES[("LON", "ROM")])),
         'ids = await flights(origin="LON", destination="ROM")\n'
         "max([(await fare(flight=f), f) for f in ids])[1]"),
    Task("fares_under_150", "How many flights from LON to ROM cost less than 150 euros?",
         (flights, fare), number(4),
         'len([f for f in await flights(origin="LON", destination="ROM") '
         "if await fare(flight=f) < 150])"),
    Task("lowest_fare_nyc_or_bos",
         "What is the lowest fare of any flight from PAR to either NYC or BOS, in euros?",
         (flights, fare), number(455),
         'min([await fare(flight=f) for d in ["NYC", "BOS"] '
         'for f in await flights(origin="PAR", destination=d)])'),
    Task("ada_spent", "How much has the customer ada spent over all her orders, in euros?",
         (orders_of, order), number(128.0), _SPENT.format(who="ada")),
    Task("bob_shipped", "Which of bob's orders have shipped? Give their ids.",
         (orders_of, order), words("o201", "o204", unwanted=("o202", "o203", "o205")),
         '[o for o in await orders_of(customer="bob") '
         'if (await order(order_id=o))["status"] == "shipped"]'),
    Task("carol_pending", "How many of carol's orders are still pending?",
         (orders_of, order), number(4),
         'len([o for o in await orders_of(customer="carol") '
         'if (await order(order_id=o))["status"] == "pending"])'),
    Task("dave_largest", "Which of dave's orders has the largest total? Give its id.",
         (orders_of, order), words("o402", unwanted=("o401", "o403")),
         'max([((await order(order_id=o))["total"], o) for o in '
         'await orders_of(customer="dave")])[1]'),
    Task("eve_items", "How many items has eve ordered, over all her orders?",
         (orders_of, order), number(15),
         'sum([(await order(order_id=o))["items"] for o in await orders_of(customer="eve")])'),
    Task("c1_out_of_stock", "Which items in cart C1 are out of stock?",
         (cart, stock), words("pear", "fig", "lime", unwanted=("apple", "mango")),
         _OUT_OF_STOCK),
    Task("stock_units", "How many apples, bananas, plums and peaches are in stock altogether?",
         (stock,), number(213),
         'sum([await stock(item=i) for i in ["apple", "banana", "plum", "peach"]])'),
    Task("warmest_city", f"Which is the warmest right now: {', '.join(WARM)}?",
         (temperature,), words("Madrid", unwanted=_others("Madrid", WARM)),
         f"max([(await temperature(city=c), c) for c in {WARM!r}])[1]"),
    Task("average_temperature",
         f"What is the average temperature right now of {', '.join(COLD)}, in Celsius?",
         (temperature,), number(10.25),
         f"sum([await temperature(city=c) for c in {COLD!r}]) / {len(COLD)}"),
    Task("c3_dearest_item", "Which item in cart C3 has the highest price per unit?",
         (cart, price), words("mango", unwanted=_others("mango", CARTS["C3"])),
         'max([(await price(item=i), i) for i in await cart(cart_id="C3")])[1]'),
    Task("c1_in_dollars", "What does cart C1 cost in total, in US dollars (USD)?",
         (cart, price, exchange_rate), number(18.75),
         _CART_TOTAL.format(cart="C1") + ' * await exchange_rate(currency="USD")'),
    Task("ada_or_bob", "Who has spent more over all their orders, ada or bob, and how much?",
         (orders_of, order), rf"(?is)^(?=.*\bbob\b).*{number(181.0)}",
         "spent = {}\nfor w in ['ada', 'bob']:\n"
         "    spent[w] = sum([(await order(order_id=o))['total'] "
         "for o in await orders_of(customer=w)])\n"
         "max([(v, w) for w, v in spent.items()])"),
    Task("restock_c1", "What would one unit of each out-of-stock item in cart C1 cost, in "
         "euros?", (cart, stock, price), number(4.25),
         f"sum([await price(item=i) for i in {_OUT_OF_STOCK}])"),
)  # fmt: skip


def chained_case(task: Task) -> EvalCase:
    """One task as a case, run to its end with its tools."""
    return EvalCase(
        id=task.id,
        suite=SUITE,
        category=CATEGORY,
        messages=(Message(role="user", content=task.question),),
        tools=tuple(ToolEntry.of(function) for function in task.tools),
        expect=ExpectAnswer(matches=task.answer),
        instructions=INSTRUCTIONS,
    )


def chained_suite(start: int = 0, limit: int | None = None, ids: Any = ()) -> list[EvalCase]:
    """The suite's cases: ``limit`` of them from ``start``, or those whose id is in ``ids``."""
    if ids:
        wanted = set(ids)
        return [chained_case(task) for task in TASKS if task.id in wanted]
    chosen = TASKS[start : None if limit is None else start + limit]
    return [chained_case(task) for task in chosen]


REFERENCE: Mapping[str, str] = {task.id: task.program for task in TASKS}
"""Case id -> a code-mode program that solves it (its last expression holds the answer)."""
