"""torch.profiler's same-name merge, recomputed on the real nesting.

torch's EventList drops an op that is the only child of a parent with the
same name (aten::sum calling aten::sum.dim_IntList's ... shows as one call).
It finds parents from its events' start and duration, each truncated to
microseconds on torch 1.13, so a child can seem to end after its parent and
escape it: torch's own merged count of `x.mean()` x3 on 1.13 is 3, 4 or 5
from one run to the next, where the real nesting gives 3 every time.
ltrace-bpf sees the real nesting (entry depth), so the reference must too.

The real nesting is the profiler's own recorded tree
(`experimental_event_tree()`: parents from enter/exit order, nanosecond
times), on torch 1.13 and later.  Only where a torch lacks it, the tree is
rebuilt from the events' times, and calls whose microsecond times touch a
neighbour's are counted as ties: the most the result can be off by.
"""


def _is_op(node):
    # Ops and record_function scopes; not Python calls or allocations.
    return str(node.tag).endswith("TorchOp")


def _from_tree(results):
    """(thread, start ns, end ns, name, dropped, tie, scopes) per op, from
    the recorded tree; scopes are the names of its enclosing ops."""
    out = []

    def walk(node, parent, scopes):
        # parent: (name, how many ops it encloses directly) of the nearest
        # enclosing op, as torch's EventList sees only ops.
        if not _is_op(node):
            for child in node.children:
                walk(child, parent, scopes)
            return
        kids = _op_children(node)
        dropped = parent is not None and parent[0] == node.name and parent[1] == 1
        out.append((node.start_tid, node.start_time_ns, node.end_time_ns, node.name, dropped, False, scopes))
        for child in kids:
            walk(child, (node.name, len(kids)), scopes + (node.name,))

    for root in results.experimental_event_tree():
        walk(root, None, ())
    return out


def _op_children(node):
    """The ops whose nearest enclosing op is this node (through any non-op
    nodes between them)."""
    kids, todo = [], list(node.children)
    while todo:
        c = todo.pop(0)
        if _is_op(c):
            kids.append(c)
        else:
            todo[:0] = list(c.children)
    return kids


def _from_times(kineto_events):
    """The same from times alone (a torch without the recorded tree)."""
    by_thread = {}
    for e in kineto_events:
        if hasattr(e, "start_ns"):
            start, dur, exact = e.start_ns(), e.duration_ns(), True
        else:
            start, dur, exact = e.start_us() * 1000, e.duration_us() * 1000, False
        by_thread.setdefault(e.start_thread_id(), []).append((start, start + dur, e.name(), exact))
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
            parents.append(stack[-1] if stack else -1)
            if parents[-1] >= 0:
                children[parents[-1]] += 1
            stack.append(i)
        for i, (start, end, name, exact) in enumerate(spans):
            p = parents[i]
            dropped = p >= 0 and spans[p][2] == name and children[p] == 1
            near = range(max(0, i - 3), min(len(spans), i + 4))
            tie = not exact and any(j != i and (spans[j][0] in (start, end) or spans[j][1] in (start, end))
                                    for j in near)
            scopes, q = [], p
            while q >= 0:
                scopes.insert(0, spans[q][2])
                q = parents[q]
            out.append((tid, start, end, name, dropped, tie, tuple(scopes)))
    return out


def merged_nodes(results):
    """Every op of a profiler result (`prof.profiler.kineto_results`) as
    (thread, start ns, end ns, name, dropped, tie, scopes): dropped when
    torch's rule merges it into its parent on the real nesting; tie only
    where that nesting had to be guessed from microsecond times."""
    if hasattr(results, "experimental_event_tree"):
        return _from_tree(results)
    return _from_times(results.events())


def merged_counts(results, keep=lambda name: name.startswith("aten::")):
    """{name: calls after the merge}, {name: calls on a microsecond tie}."""
    counts, ties = {}, {}
    for _, _, _, name, dropped, tie, _ in merged_nodes(results):
        if keep(name):
            if not dropped:
                counts[name] = counts.get(name, 0) + 1
            if tie:
                ties[name] = ties.get(name, 0) + 1
    return counts, ties
