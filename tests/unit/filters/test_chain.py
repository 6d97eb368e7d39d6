"""gateway/filters/chain.py: which filters run, in which order, on what, and what a
failing filter becomes. Bodies are plain objects: the chain never looks inside them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from gateway.filters.api import BaseFilter, RequestCall, ResponseCall
from gateway.filters.chain import NEVER_FILTERED, FilterChain, Rejected
from gateway.identity import ClientIdentity
from gateway.slots import Fault

ALICE = ClientIdentity("public", "10.0.0.7", 50000, "User:alice", tenant="acme")
PRODUCE, FETCH, METADATA = 0, 1, 3


@dataclasses.dataclass(frozen=True)
class Body:
    text: str


Hook = Callable[[Any], None]


class Step(BaseFilter):
    """Records each call in ``seen`` and runs ``request``/``response`` on it."""

    def __init__(
        self,
        name: str,
        seen: list[str],
        keys: frozenset[int] | None = None,
        request: Hook | None = None,
        response: Hook | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.api_keys = keys
        self.seen = seen
        self._request = request
        self._response = response

    def on_request(self, call: RequestCall) -> None:
        self.seen.append(f"{self.name}>")
        if self._request is not None:
            self._request(call)

    def on_response(self, call: ResponseCall) -> None:
        self.seen.append(f"<{self.name}")
        if self._response is not None:
            self._response(call)


class Decoder:
    """A body's decoder that counts how often it ran."""

    def __init__(self, body: Any = None) -> None:
        self.body = Body("original") if body is None else body
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        return self.body


def read(call: Any) -> None:
    assert call.body is not None


def append(suffix: str) -> Hook:
    def hook(call: Any) -> None:
        call.replace(Body(call.body.text + suffix))

    return hook


def chain_of(*filters: BaseFilter) -> Any:
    return FilterChain(filters).bind(ALICE)


def test_requests_run_in_configured_order_and_responses_in_reverse() -> None:
    seen: list[str] = []
    bound = chain_of(Step("a", seen), Step("b", seen), Step("c", seen))
    bound.request(PRODUCE, 9, 1, Decoder())
    bound.response(PRODUCE, 9, 7, Body("answer"))
    assert seen == ["a>", "b>", "c>", "<c", "<b", "<a"]


def test_only_the_filters_that_want_a_key_run() -> None:
    seen: list[str] = []
    bound = chain_of(Step("produce", seen, frozenset({PRODUCE})), Step("all", seen))
    bound.request(FETCH, 12, 1, Decoder())
    bound.response(FETCH, 12, 7, Body("answer"))
    assert seen == ["all>", "<all"]


def test_a_key_nobody_wants_is_never_decoded() -> None:
    seen: list[str] = []
    bound = chain_of(Step("produce", seen, frozenset({PRODUCE}), request=read))
    decode = Decoder()
    assert not bound.wants(FETCH)
    assert bound.request(FETCH, 12, 1, decode) is None
    assert decode.calls == 0 and seen == []
    assert bound.wants(PRODUCE)


def test_a_filter_that_does_not_read_the_body_does_not_decode_it() -> None:
    seen: list[str] = []
    decode = Decoder()
    assert chain_of(Step("look-away", seen)).request(PRODUCE, 9, 1, decode) is None
    assert seen == ["look-away>"] and decode.calls == 0


def test_the_body_is_decoded_once_for_all_filters() -> None:
    seen: list[str] = []
    decode = Decoder()
    bound = chain_of(Step("a", seen, request=read), Step("b", seen, request=read))
    assert bound.request(PRODUCE, 9, 1, decode) is None  # read, not replaced
    assert decode.calls == 1


def test_a_replacement_is_what_the_next_filter_sees_and_what_is_forwarded() -> None:
    seen: list[str] = []
    texts: list[str] = []
    bound = chain_of(
        Step("a", seen, request=append("+a")),
        Step("b", seen, request=lambda call: texts.append(call.body.text)),
        Step("c", seen, request=append("+c")),
    )
    forwarded = bound.request(PRODUCE, 9, 1, Decoder())
    assert texts == ["original+a"]
    assert forwarded == Body("original+a+c")


def test_a_replacement_survives_filters_after_it_that_only_read() -> None:
    seen: list[str] = []
    bound = chain_of(Step("a", seen, request=append("+a")), Step("b", seen, request=read))
    assert bound.request(PRODUCE, 9, 1, Decoder()) == Body("original+a")


def test_a_response_replacement_passes_on_in_reverse_order() -> None:
    seen: list[str] = []
    bound = chain_of(Step("a", seen, response=append("+a")), Step("b", seen, response=append("+b")))
    assert bound.response(PRODUCE, 9, 7, Body("answer")) == Body("answer+b+a")


def test_an_untouched_response_is_the_same_object() -> None:
    seen: list[str] = []
    answer = Body("answer")
    assert chain_of(Step("a", seen, response=read)).response(PRODUCE, 9, 7, answer) is answer


def test_a_rejection_stops_the_chain() -> None:
    seen: list[str] = []

    def refuse(call: Any) -> None:
        call.reject(17, "no such name")

    bound = chain_of(Step("a", seen), Step("guard", seen, request=refuse), Step("c", seen))
    outcome = bound.request(PRODUCE, 9, 1, Decoder())
    assert isinstance(outcome, Rejected)
    assert (outcome.name, outcome.code, outcome.message) == (
        "guard",
        ErrorCode.invalid_topic_exception,
        "no such name",
    )
    assert seen == ["a>", "guard>"]


def test_a_rejection_with_an_unknown_error_code_is_a_gateway_fault() -> None:
    seen: list[str] = []
    bound = chain_of(Step("guard", seen, request=lambda call: call.reject(99999)))
    with pytest.raises(Fault) as info:
        bound.request(PRODUCE, 9, 1, Decoder())
    assert info.value.side == "gateway"
    assert "guard" in info.value.reason and "99999" in info.value.reason


class Boom(Exception):
    pass


def explode(call: Any) -> None:
    raise Boom("secret-record-value")


@pytest.mark.parametrize("hook", ["request", "response"])
def test_an_exception_becomes_a_gateway_fault_naming_the_filter(hook: str) -> None:
    seen: list[str] = []
    careless = (
        Step("careless", seen, request=explode)
        if hook == "request"
        else Step("careless", seen, response=explode)
    )
    bound = chain_of(careless, Step("after", seen))
    with pytest.raises(Fault) as info:
        if hook == "request":
            bound.request(PRODUCE, 9, 1, Decoder())
        else:
            bound.response(PRODUCE, 9, 7, Body("answer"))
    assert info.value.side == "gateway"
    assert info.value.reason == "filter careless failed: Boom"  # never the exception's text
    # requests: the filters after it never run; responses: they ran before it (reverse)
    assert seen == (["careless>"] if hook == "request" else ["<after", "<careless"])


def test_replacing_with_another_message_type_is_a_fault() -> None:
    seen: list[str] = []
    bound = chain_of(Step("wrong", seen, request=lambda call: call.replace("not a Body")))
    with pytest.raises(Fault, match="filter wrong failed: TypeError"):
        bound.request(PRODUCE, 9, 1, Decoder())


def test_a_fault_raised_by_a_filter_keeps_its_side() -> None:
    def client_fault(call: Any) -> None:
        raise Fault("client", "nonsense from the client")

    bound = chain_of(Step("strict", [], request=client_fault))
    with pytest.raises(Fault) as info:
        bound.request(PRODUCE, 9, 1, Decoder())
    assert (info.value.side, info.value.reason) == ("client", "nonsense from the client")


@pytest.mark.parametrize(
    "api_key", [17, 18, 36], ids=["SaslHandshake", "ApiVersions", "SaslAuthenticate"]
)
def test_sasl_and_api_versions_are_never_filtered(api_key: int) -> None:
    seen: list[str] = []
    assert api_key in NEVER_FILTERED
    assert not chain_of(Step("all", seen)).wants(api_key)
    assert not chain_of(Step("asks", seen, frozenset({api_key}))).wants(api_key)
    assert chain_of(Step("all", seen)).wants(METADATA)


def test_an_empty_chain_wants_nothing_and_is_false() -> None:
    chain = FilterChain([])
    assert not chain
    assert not chain.wants(PRODUCE)
    assert FilterChain([Step("a", [])])


def test_state_is_per_filter_and_per_connection() -> None:
    def count(call: Any) -> None:
        call.context.state["n"] = call.context.state.get("n", 0) + 1
        counts.append(call.context.state["n"])

    counts: list[int] = []
    chain = FilterChain([Step("a", [], request=count), Step("b", [], request=count)])
    first, second = chain.bind(ALICE), chain.bind(ALICE)
    first.request(PRODUCE, 9, 1, Decoder())
    first.request(PRODUCE, 9, 2, Decoder())
    second.request(PRODUCE, 9, 1, Decoder())
    assert counts == [1, 1, 2, 2, 1, 1]


def test_a_filter_sees_the_connection_and_the_request() -> None:
    got: dict[str, Any] = {}

    def look(call: Any) -> None:
        got.update(
            principal=call.context.principal, tenant=call.context.tenant,
            host=call.context.client_host, listener=call.context.listener,
            logger=call.context.log.name, api=call.api_name, version=call.api_version,
            correlation_id=call.correlation_id,
        )  # fmt: skip

    chain_of(Step("eyes", [], request=look)).request(METADATA, 12, 42, Decoder())
    assert got == {
        "principal": "User:alice", "tenant": "acme", "host": "10.0.0.7", "listener": "public",
        "logger": "kgw.filters.eyes", "api": "metadata", "version": 12, "correlation_id": 42,
    }  # fmt: skip


def test_a_response_carries_its_request_correlation_id() -> None:
    seen: list[int] = []

    class Pairing(BaseFilter):
        api_keys = frozenset({PRODUCE})

        def on_response(self, call: ResponseCall) -> None:
            seen.append(call.correlation_id)

    FilterChain([Pairing()]).bind(ALICE).response(PRODUCE, 9, 41, Body("answer"))
    assert seen == [41]


def test_responses_are_decoded_only_for_filters_with_a_response_hook() -> None:
    class RequestOnly(BaseFilter):
        api_keys = frozenset({PRODUCE})

    class Both(BaseFilter):
        api_keys = frozenset({FETCH})

        def on_response(self, call: ResponseCall) -> None:
            return None

    chain = FilterChain([RequestOnly(), Both()])
    assert chain.wants(PRODUCE) and not chain.wants_response(PRODUCE)
    assert chain.wants_response(FETCH)


def test_rejecting_with_no_error_is_a_gateway_fault() -> None:
    class Approver(BaseFilter):
        def on_request(self, call: RequestCall) -> None:
            call.reject(0)

    bound = FilterChain([Approver()]).bind(ALICE)
    with pytest.raises(Fault) as caught:
        bound.request(PRODUCE, 9, 1, lambda: Body("request"))
    assert caught.value.side == "gateway"
