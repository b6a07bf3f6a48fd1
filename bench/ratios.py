"""How the benches turn alternating rounds into one ratio.

A round runs both sides of a comparison seconds apart, and the load of a shared machine drifts
over a run, so each round's ratio compares like with like; the figure a bench reports is the
median of those, printed with them.  (A ratio of the two sides' medians could pair one side's
quiet round with the other's busy one.)
"""

import statistics


def paired_ratio(numerators, denominators):
    """``(median, text)``: the median over rounds of ``numerators[i] / denominators[i]``, and
    each round's ratio as text ("0.83, 0.86, 0.84")."""
    ratios = [a / b for a, b in zip(numerators, denominators, strict=True)]
    return statistics.median(ratios), ", ".join("%.2f" % r for r in ratios)
