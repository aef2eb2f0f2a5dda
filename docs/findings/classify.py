#!/usr/bin/env python3
"""Sort a live hunt's failed cases into the findings page's classes, by rules over their verdicts.

Usage:
  classify.py REPORT.jsonl BRIDGE              classes and how many cases show each
  classify.py REPORT.jsonl BRIDGE OLD.jsonl    the same, then case by case against an older hunt
                                               of the same seed (which cases changed oracles)

REPORT is what `harness live ... --report REPORT.jsonl` wrote (one JSON line per case: index,
token, wall_s, oracles, violations [{oracle, at_ms, detail}]). BRIDGE is supergateway, mcp-proxy
or mcp-remote. A case counts once per class it shows. The verdicts no rule explains are printed
last: each is a case to replay (`harness live --replay TOKEN --runs 3`) and read, then either a
new class here (and a section of docs/findings.md) or a harness error to fix.

The rules match the text the oracles write (harness/src/relay/), so a changed detail can move a
verdict to "unexplained": that is the signal to read it again, never to widen a rule blindly.
"""
import collections
import json
import re
import sys

BIG = 2**53


def big_id(detail):
    m = re.search(r'(?:tools/call|tools/list|ping|initialize) id (-?\d+)', detail)
    return bool(m) and abs(int(m.group(1))) > BIG


def of_bridge(bridge, **names):
    return names.get(bridge.replace('-', '_'), names.get('other'))


def classify(bridge, oracle, detail, oracles=(), others=()):
    """The class of one verdict (`oracles`: every oracle its case broke; `others`: the details of
    its case's verdicts), or None when no rule explains it."""
    if oracle in ('user_outcomes', 'bounded_latency') and big_id(detail) and 'never answered' in detail:
        return of_bridge(bridge, supergateway='S5', mcp_remote='M8', other='big id')
    # A line with no method (an invalid request) is named by its id alone.
    if oracle == 'bounded_latency' and ('malformed line' in detail or re.match(r'\s*id (\d+|"[^"]*") sent', detail)):
        return 'invalid lines'
    if oracle == 'sessions_initialized' and 'never initialized' in detail:
        return of_bridge(bridge, supergateway='S1', mcp_remote='M5', other='uninitialized session')
    # A re-initialized session (after a 404) gets the client's calls before its
    # `notifications/initialized` (M7).
    if oracle == 'sessions_initialized' and bridge == 'mcp-remote' and 'before notifications/initialized' in detail:
        return 'M7'
    if oracle == 'sessions_initialized' and 'a second time' in detail:
        return of_bridge(bridge, mcp_remote='M6', other='initialized twice')
    if oracle == 'server_messages_delivered' and 'never read it' in detail:
        return of_bridge(bridge, supergateway='S2', mcp_proxy='P4', other='server message lost')
    if oracle in ('initialize_answered', 'lives_until_stdin_closes'):
        if 'process exited' in detail or 'while its stdin was still open' in detail:
            # mcp-proxy's exit at start-up (its `initialize` unanswered) is P5; after a session
            # began, one failed POST ended it (P1, Streamable HTTP).
            started = 'initialize_answered' not in oracles
            return of_bridge(bridge, supergateway='S3 exit', mcp_proxy='P1' if started else 'P5', mcp_remote='M1')
        if 'still waiting' in detail:
            return of_bridge(bridge, supergateway='S3 hang (over Streamable HTTP, or lone CR on initialize)', mcp_proxy='P6', mcp_remote='M1')
    if oracle == 'bounded_latency' and re.match(r'initialize id \S+ sent at \d+ ms never answered', detail):
        return of_bridge(bridge, supergateway='S3 hang (over Streamable HTTP, or lone CR on initialize)', mcp_proxy='P6', mcp_remote='M1')
    # A reply the mock framed with lone CRs, held by the bridge's SSE parser until more bytes came
    # (eventsource-parser: supergateway, mcp-remote); reports before 5eb2f43 name no framing.
    if oracle == 'reply_accounting' and 'but the client read nothing' in detail and bridge != 'mcp-proxy':
        if re.search(r'framed cr(\+|\))', detail):
            return 'lone CR, a reply'
        if 'framed ' not in detail:
            return 'a reply never read (no framing in the verdict; lone CR in each one replayed)'
    if oracle in ('user_outcomes', 'reply_accounting') and '"message":"Request timed out"' in detail and bridge == 'supergateway':
        return "lone CR, a reply, then the SDK's 60 s time-out"
    # mcp-remote's own deadline ends a call whose lone-CR reply its parser still holds.
    if oracle == 'reply_accounting' and bridge == 'mcp-remote' and re.search(r'framed cr(\+|\))', detail) and 'mcp-remote: timed out' in detail:
        return 'lone CR, a reply, then its time-out'

    if oracle == 'user_outcomes' and "timed out after 30s waiting for the remote server to answer 'initialize'" in detail:
        return 'M3'
    # Over HTTP+SSE the SDK's transport throws a plain Error on a 404, which mcp-remote's
    # isSessionExpired (an SdkHttpError with a session id) does not take for an expired session:
    # the call is failed with the 404 instead of sent again once the session is re-established
    # (M9; the twenty-third round replayed c9bc8b380b8ea0a6, 3 of 3). Until 8331ad3 a 404 excused
    # the failure as a refusal.
    if oracle == 'user_outcomes' and bridge == 'mcp-remote' and 'Error POSTing to endpoint (HTTP 404)' in detail:
        return 'M9'
    # supergateway over HTTP+SSE answers the SDK transport's 404 error as it came (S8, the
    # HTTP+SSE face of S6; the twenty-third round replayed c9bc8b380b8ea0a6).
    if oracle == 'user_outcomes' and bridge == 'supergateway' and 'Error POSTing to endpoint (HTTP 404)' in detail:
        return 'S8'
    # A request never answered whose reply the same case's reply_accounting saw lost at the end
    # of a lone-CR stream: the user's face of that loss (judged by user_outcomes since H20, when
    # the POST stream's end no longer counted as an outage the bridge was reconnecting from).
    request = re.match(r'(\S+ id \S+): no fault forced its outcome, never answered', detail)
    if oracle == 'user_outcomes' and request and any(
            f'the reply to {request.group(1)} ' in other and re.search(r'framed cr(\+|\))', other) for other in others):
        return 'lone CR, a reply'
    # After a restart supergateway keeps the forgotten session over Streamable HTTP and fails
    # every call with the server's 404 (S6). Until this round user_outcomes excused those as cut
    # in flight by the restart, or as an outage "while the bridge was reconnecting" it never ended.
    if oracle == 'user_outcomes' and bridge == 'supergateway' and 'Session not found' in detail:
        return 'S6'
    if oracle == 'user_outcomes' and ('"code":0,"message":""' in detail
                                      or '"text":"","type":"text"}],"isError":true' in detail
                                      or 'never sent it again and never answered it' in detail):
        # One refused POST: over HTTP+SSE the session is dead (P7); over Streamable HTTP the
        # process dies (P1) or answers empty errors (the code-0 row).
        return 'P7 (HTTP+SSE), or P1 / code-0 errors (Streamable HTTP)'
    if oracle == 'one_reply_per_id' and 'a second reply for id' in detail:
        return 'M2'
    # stdin closed while mcp-remote's own probe holds the client's `initialize` (its answer lost,
    # say, on a lone-CR stream): the process waits out the SDK's 60 s (M1's hold; the twentieth
    # round replayed 45a2cd0816492fd5 and 9b15a637b42e0048, 3 of 3 each).
    if oracle == 'exits_after_stdin_closes' and bridge == 'mcp-remote':
        return 'M1'
    if oracle == 'exits_after_stdin_closes' and bridge == 'mcp-proxy':
        return 'P6 (stdin unread while its start-up hangs)'
    if oracle == 'reply_accounting' and bridge == 'mcp-proxy' and 'Conn' in detail:
        return 'P7 (a reply lost as the session died)'
    # A tool call's answer the relayer wrote and the client never read: mcp-proxy's SDK lists
    # tools itself after the call (mcp/client/session.py:419-421) and a failure of that list's POST
    # ends the session with the answer in hand (P8; the eighteenth round replayed
    # b788932210eae308 and 84ee19bb605d8272, 5 of 5 each). A tools/list's reply never read was H16
    # (mcp-proxy's own list taken for the client's), fixed: none is classified.
    if oracle == 'reply_accounting' and bridge == 'mcp-proxy' and 'the reply to tools/call' in detail and 'but the client read nothing' in detail:
        return 'P8'
    if oracle == 'notifications_delivered':
        if bridge == 'mcp-proxy':
            # Cancellations and roots/list_changed are never forwarded (P2, P3); anything else it
            # drops once its HTTP+SSE session died (the write stream closed: P7's path).
            if 'notifications/cancelled' in detail:
                return 'P2'
            if 'notifications/roots/list_changed' in detail:
                return 'P3'
            return 'P7 (a notification after the session died)'
        if 'accepted the client' in detail:
            return of_bridge(bridge, supergateway='S4', mcp_remote='M4')
        return 'a notification never sent'
    return None


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    cases, bridge = load(sys.argv[1]), sys.argv[2]
    if bridge not in ('supergateway', 'mcp-proxy', 'mcp-remote'):
        sys.exit(f'unknown bridge {bridge!r}: supergateway, mcp-proxy or mcp-remote')
    failed = [c for c in cases if c['violations']]
    per, unexplained = collections.Counter(), []
    for case in failed:
        shown = set()
        for v in case['violations']:
            name = classify(bridge, v['oracle'], v['detail'], case['oracles'], [w['detail'] for w in case['violations']])
            if name is None:
                unexplained.append((case['token'], v['oracle'], v['detail'][:240]))
            else:
                shown.add(name)
        per.update(shown)
    print(f'{len(failed)} of {len(cases)} cases failed')
    for name, n in per.most_common():
        print(f'  {n:4}  {name}')
    print(f'unexplained verdicts: {len(unexplained)}')
    for token, oracle, detail in unexplained:
        print(f'  {token}  [{oracle}] {detail}')
    if len(sys.argv) == 4:
        compare(load(sys.argv[3]), cases)


def compare(old, new):
    """Case by case: the same token judged by two hunts (one seed, two harness versions)."""
    before = {c['token']: set(c['oracles']) for c in old}
    same, changed = 0, []
    for case in new:
        if case['token'] not in before:
            continue
        was, now = before[case['token']], set(case['oracles'])
        if was == now:
            same += 1
        else:
            changed.append((case['token'], sorted(was - now), sorted(now - was)))
    print(f'against the older hunt: {same} cases gave the same oracles, {len(changed)} differ')
    for token, lost, gained in changed:
        print(f'  {token}  lost {lost or "-"}  gained {gained or "-"}')


if __name__ == '__main__':
    main()
