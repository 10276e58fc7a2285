"""The kit's calculator: exact arithmetic over ``Decimal``, parsed by our own recursive descent — never ``eval``.

What it does
- ``calculator(expression)`` tokenizes and parses + - * / ** % (modulo, or percent when nothing follows it),
  parentheses, unary signs, decimals, scientific notation and "X% of Y", with bounded input length, nesting depth,
  literal size, exponent, magnitude and time; bad input raises ``ToolError`` with a message for the model.
  The time limit counts the calculator's own CPU time (``time.thread_time``), not the wall clock: a busy or
  one-CPU machine that pauses the thread must not turn a right answer into an error. The input limits already keep
  the worst expression near 5 ms; the time limit is the guard behind them.

What it leaves out
- Functions (sqrt, sin) and variables.
"""

from __future__ import annotations

import decimal
import re
import time

from toolkit.errors import ToolError

# ============================================================== calculator
MAX_EXPR_CHARS = 200


MAX_DEPTH = 32  # nested parentheses / unary signs


MAX_LITERAL_DIGITS = 30


MAX_EXPONENT = 1000  # |b| in a ** b


MAX_MAGNITUDE = decimal.Decimal("1e100")


MIN_MAGNITUDE = decimal.Decimal("1e-300")  # smaller non-zero results are refused: a JSON float cannot hold them


PRECISION = 28  # significant digits of the decimal arithmetic


MAX_CPU_SECONDS = 0.5  # this thread's CPU time for one expression (a garbage collection pass counts too)


_CTX = decimal.Context(
    prec=PRECISION,
    Emax=999_999,
    Emin=-999_999,
    traps=[decimal.Overflow, decimal.DivisionByZero, decimal.InvalidOperation],
)


_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)|(?P<op>\*\*|[-+*/%^()×÷])"
    r"|(?P<of>of\b|的))",
    re.I,
)


_SYNONYMS = {"×": "*", "÷": "/", "^": "**", "的": "of"}


def _tokenize(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            bad = text[pos:].lstrip()[:12]
            raise ToolError(
                f"calculator: unexpected text {bad!r} at position {pos}; "
                "only numbers, + - * / ** ^ % × ÷ ( ) and 'of' (的) are allowed"
            )
        tok = m.group("num") or m.group("op") or m.group("of").lower()
        if m.group("num") and len(re.sub(r"[^0-9]", "", tok)) > MAX_LITERAL_DIGITS:
            raise ToolError(f"calculator: number literal longer than {MAX_LITERAL_DIGITS} digits")
        out.append(_SYNONYMS.get(tok, tok))
        pos = m.end()
    return out


class _Parser:
    """expr := term (('+'|'-') term)* ; term := unary (('*'|'/'|'%'|'of') unary)* ;
    unary := ('+'|'-') unary | power ; power := postfix ('**' unary)? ; postfix := atom '%'* ;
    atom := number | '(' expr ')'.  A '%' followed by an operand is modulo, otherwise percent."""

    def __init__(self, tokens: list[str]):
        self.t, self.i, self.depth = tokens, 0, 0
        self.deadline = time.thread_time() + MAX_CPU_SECONDS

    def peek(self, k: int = 0):
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def check(self, value: decimal.Decimal) -> decimal.Decimal:
        if time.thread_time() > self.deadline:
            raise ToolError(f"calculator: took more than {MAX_CPU_SECONDS * 1000:.0f} ms of CPU time")
        if not value.is_finite() or abs(value) > MAX_MAGNITUDE:
            raise ToolError(f"calculator: result magnitude exceeds {MAX_MAGNITUDE:.0e}")
        return value

    def enter(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ToolError(f"calculator: nesting deeper than {MAX_DEPTH}")

    def expr(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            op, rhs = self.take(), self.term()
            value = self.check(_CTX.add(value, rhs) if op == "+" else _CTX.subtract(value, rhs))
        return value

    def term(self):
        value = self.unary()
        while self.peek() in ("*", "/", "%", "of"):
            op, rhs = self.take(), self.unary()
            if op in ("*", "of"):
                value = _CTX.multiply(value, rhs)
            elif rhs == 0:
                raise ToolError("calculator: division by zero")
            else:
                value = _CTX.divide(value, rhs) if op == "/" else _CTX.remainder(value, rhs)
            value = self.check(value)
        return value

    def unary(self):
        if self.peek() in ("+", "-"):
            self.enter()
            sign = self.take()
            value = self.unary()
            self.depth -= 1
            return -value if sign == "-" else value
        return self.power()

    def power(self):
        base = self.postfix()
        if self.peek() != "**":
            return base
        self.take()
        self.enter()
        exp = self.unary()  # right-associative: 2 ** 3 ** 2 == 2 ** 9
        self.depth -= 1
        if abs(exp) > MAX_EXPONENT:
            raise ToolError(f"calculator: exponent {exp} exceeds the limit of {MAX_EXPONENT}")
        if base == 0 and exp < 0:
            raise ToolError("calculator: zero to a negative power")
        if base < 0 and exp != exp.to_integral_value():
            raise ToolError("calculator: negative base with a fractional exponent")
        # Estimate the size first so the power is never computed when it would be huge (a tiny result, e.g.
        # 2 ** -400, is computed: only the final result has a lower limit).
        if base != 0 and exp * abs(base).log10(_CTX) > 101:
            raise ToolError(
                f"calculator: result magnitude exceeds {MAX_MAGNITUDE:.0e} (about 1e{int(exp * abs(base).log10(_CTX))})"
            )
        return self.check(_CTX.power(base, exp))

    def postfix(self):
        value = self.atom()
        # A '%' that is not followed by an operand ('(' or a number) is percent: '250*15%', '15% of 250',
        # '10%-5'. Followed by an operand it is modulo: '10 % 3'.
        while self.peek() == "%" and not _starts_operand(self.peek(1)):
            self.take()
            value = self.check(_CTX.divide(value, 100))
        return value

    def atom(self):
        tok = self.take()
        if tok is None:
            raise ToolError("calculator: expression ends too early")
        if tok == "(":
            self.enter()
            value = self.expr()
            if self.take() != ")":
                raise ToolError("calculator: missing ')'")
            self.depth -= 1
            return value
        if tok[0].isdigit() or tok[0] == ".":
            return self.check(decimal.Decimal(tok))
        raise ToolError(f"calculator: expected a number or '(' but found {tok!r}")


def _starts_operand(tok) -> bool:
    return tok is not None and (tok == "(" or tok[0].isdigit() or tok[0] == ".")


def _plain_number(value: decimal.Decimal) -> int | float:
    # Whole numbers come back as JSON integers, every digit the decimal arithmetic holds (up to PRECISION
    # significant digits exact); other results as floats (about 16 significant digits).
    if value == value.to_integral_value():
        return int(value)
    return float(value)


def calculator(expression: str) -> dict:
    """Calculates an arithmetic expression, e.g. "250 * 15%" or "(3 + 4) ** 2 / 7".

    Operators: + - * / ** (power; ^ is the same as **), % (modulo, or percent when no number follows it),
    "X% of Y" (of and 的 multiply), the signs ×÷, parentheses, decimals and 1.5e3 notation. Decimal arithmetic, exact
    to 28 significant digits: whole-number results up to 28 digits are exact integers (beyond 2**53 also as
    the string "exact"), other results are floats. Limits: 200 characters, |result| <= 1e100. Use it for any arithmetic instead of computing in your head.

    Args:
        expression: The arithmetic expression to evaluate, e.g. "250 * 0.15".
    """
    if not isinstance(expression, str):
        raise ToolError(f"calculator: expression must be a string, got {type(expression).__name__}")
    if len(expression) > MAX_EXPR_CHARS:
        raise ToolError(f"calculator: expression longer than {MAX_EXPR_CHARS} characters ({len(expression):,})")
    tokens = _tokenize(expression)
    if not tokens:
        raise ToolError("calculator: empty expression")
    parser = _Parser(tokens)
    try:
        value = parser.expr()
    except decimal.DecimalException as e:
        raise ToolError(f"calculator: arithmetic error ({type(e).__name__})") from None
    if parser.peek() is not None:
        raise ToolError(f"calculator: unexpected {parser.peek()!r} after a complete expression")
    value = value.normalize(_CTX)
    if value != 0 and abs(value) < MIN_MAGNITUDE:
        raise ToolError(
            f"calculator: result {value:.3e} is closer to zero than {MIN_MAGNITUDE:.0e}, "
            "the smallest magnitude it returns"
        )
    result = _plain_number(value)
    out = {"expression": expression, "result": result}
    if isinstance(result, int) and abs(result) > 2**53:
        out["exact"] = str(result)  # JSON readers that hold numbers as doubles (JavaScript) lose these digits
    return out
