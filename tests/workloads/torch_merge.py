"""torch.profiler's same-name merge, recomputed from its raw events.

torch's EventList drops an op that is the only child of a parent with the
same name (aten::sum calling aten::sum.dim_IntList's ... shows as one call).
It finds parents from microsecond timestamps, so where a child and a
neighbour share a microsecond it may nest them differently from the real
calls; ltrace-bpf sees the real nesting (entry depth).  This module rebuilds
the tree from the events' own times (nanoseconds where torch gives them) and
applies the same rule: the counts the exact nesting gives, which is what
ltrace-bpf must print.  Where only microseconds exist (torch 1.13) it also
says how many calls per name sit on such a tie: the most the result can be
off by, from the data, not a guessed slack.
"""


def _events(kineto_events):
    out = []
    for e in kineto_events:
        if hasattr(e, "start_ns"):
            start, dur, exact = e.start_ns(), e.duration_ns(), True
        else:
            start, dur, exact = e.start_us() * 1000, e.duration_us() * 1000, False
        out.append((e.start_thread_id(), start, start + dur, e.name(), exact))
    return out


def merged_nodes(kineto_events):
    """Every event as (thread, start ns, end ns, name, dropped, tie): dropped
    when torch's rule merges it into its parent, by the events' nesting in
    time; tie when its times are microseconds and touch a neighbour's."""
    by_thread = {}
    for tid, start, end, name, exact in _events(kineto_events):
        by_thread.setdefault(tid, []).append((start, end, name, exact))
    out = []
    for tid, spans in by_thread.items():
        # Parents first: earlier start, and at the same start the longer one.
        spans.sort(key=lambda s: (s[0], -s[1]))
        parents, children, stack = [], [0] * len(spans), []
        for i, (start, end, name, exact) in enumerate(spans):
            # As torch's _populate_cpu_children: an open span is no parent
            # if it ended by this start or ends before this end.
            while stack and (start >= spans[stack[-1]][1] or end > spans[stack[-1]][1]):
                stack.pop()
            parent = stack[-1] if stack else -1
            parents.append(parent)
            if parent >= 0:
                children[parent] += 1
            stack.append(i)
        for i, (start, end, name, exact) in enumerate(spans):
            # torch: a child whose parent has its name and no other child is
            # dropped (its children become the parent's; a chain of such
            # children goes in one pass, as here).
            p = parents[i]
            dropped = p >= 0 and spans[p][2] == name and children[p] == 1
            near = range(max(0, i - 3), min(len(spans), i + 4))
            tie = not exact and any(j != i and (spans[j][0] in (start, end) or spans[j][1] in (start, end))
                                    for j in near)
            out.append((tid, start, end, name, dropped, tie))
    return out


def merged_counts(kineto_events, keep=lambda name: name.startswith("aten::")):
    """{name: calls after the merge}, {name: calls on a microsecond tie}."""
    counts, ties = {}, {}
    for _, _, _, name, dropped, tie in merged_nodes(kineto_events):
        if keep(name):
            if not dropped:
                counts[name] = counts.get(name, 0) + 1
            if tie:
                ties[name] = ties.get(name, 0) + 1
    return counts, ties
