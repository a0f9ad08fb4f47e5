"""Dependency cycles in a DAG's tasks, found and told in one line."""

from __future__ import annotations


def find_cycle(graph: dict[str, tuple[str, ...]]) -> list[str] | None:
    """One dependency cycle as a path that ends where it starts, or None.

    Iterative depth-first search: a valid 10,000-task chain is as deep as the
    walk gets, far beyond Python's recursion limit.
    """
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for root in sorted(graph):
        if root in state:
            continue
        path = [root]
        state[root] = 1
        pending = [iter(graph.get(root, ()))]
        while pending:
            for upstream in pending[-1]:
                mark = state.get(upstream)
                if mark == 1:
                    return [*path[path.index(upstream) :], upstream]
                if mark is None:
                    state[upstream] = 1
                    path.append(upstream)
                    pending.append(iter(graph.get(upstream, ())))
                    break
            else:
                pending.pop()
                state[path.pop()] = 2
    return None


def cycle_text(cycle: list[str]) -> str:
    names = list(reversed(cycle))
    if len(names) > 12:  # a 10,000-task cycle is one line, not 10,000 names
        names = [*names[:5], f"... {len(names) - 11} more ...", *names[-6:]]
    return " -> ".join(names)
