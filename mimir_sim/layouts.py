"""Layout generator: one concrete kitchen per seed from a scenario's ``roles:``.

A scenario file may describe a family of kitchens rather than one. Its ``roles:`` section names
what a seed decides; the rest of the file refers to a fixture role by writing ``$name`` where a
fixture id would stand. :func:`generate_layout` draws one assignment of every role from the seed
and returns an ordinary :class:`~mimir_sim.scenario.Scenario` in which every ``$name`` is
replaced by a fixture id, so the scene, the instruction desk and the judge never see a role.

Role kinds (each role is a mapping with exactly one of ``among``, ``permute``, ``variants`` or
``reorder``)::

    roles:
      # fixture role: the seed picks one fixture of ``among``
      locked: {among: [cab_1, cab_2, cab_3], locked: true}    # the pick is locked
      fruit:  {among: [cab_1, cab_2, cab_3], unlike: [locked]}  # never the same as ``locked``
      start:  {among: [cab_1, cab_2, cab_3]}
      # order role: the listed fixtures trade their ``y`` places on the wall
      wall:   {permute: [cab_1, cab_2, cab_3]}
      # variant role: the listed objects all take one of the variants
      look:   {objects: [ketchup_1], variants: [{color: [0.8, 0.1, 0.1]}, {color: [0.9, 0.4, 0.1]}]}
      # reorder role: these instructions (0-based file indices) run in any order among their
      # own places in the sequence
      middle: {reorder: [3, 4, 5]}

``$name`` (a fixture role) may stand for a fixture id in ``start_at``, an object's ``in``, an
instruction's ``start_at``, a move's ``in``, a criterion's ``fixture`` and an ``answer`` entry.
An object whose ``in`` is ``$fruit`` moves, with its slot, into the fixture the seed picks for
``fruit``; a ``locked: true`` role locks its pick. Only fixtures of one type and (to 1 mm) one
width may trade places, so the wall keeps its shape: the set of ``y`` places, and with it the
counter under the upper cabinets, stays the same.

The draw is uniform over every assignment the roles allow (:func:`role_assignments`), from
``numpy.random.default_rng([seed, LAYOUT_STREAM])``: a stream of its own, so the object jitter
drawn from ``default_rng(seed)`` when the scene is built is the same as without roles.

The role types live with the other scenario data in :mod:`mimir_sim.scenario_specs`; this
module holds the generator; :mod:`mimir_sim.scenario` parses and checks ``roles:`` (refusing
unknown names, unknown fixtures and contradictions at load) and uses this module to return the
layout of a file's own seed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields, replace

import numpy as np

from mimir_sim.scenario_specs import (
    Assignment,
    CriterionSpec,
    FixtureRole,
    FixtureSpec,
    InstructionSpec,
    LayoutTemplate,
    MoveSpec,
    ObjectSpec,
    OrderRole,
    ReorderRole,
    RoleSpec,
    RoleValue,
    Scenario,
    VariantRole,
    VariantSpec,
)

#: a string starting with this names a fixture role instead of a fixture
ROLE_PREFIX = "$"
#: second entropy word of the layout generator's random stream (see the module docstring)
LAYOUT_STREAM = 0x1A7047
#: fixtures whose widths differ by at most this much (m) may trade places on the wall
WIDTH_CLASS_TOLERANCE = 0.001


def is_role_ref(value: str | None) -> bool:
    """Whether ``value`` names a role (``$name``) rather than an id."""
    return value is not None and value.startswith(ROLE_PREFIX)


def role_ref_name(value: str) -> str:
    """The role name of a ``$name`` reference."""
    return value[len(ROLE_PREFIX) :]


# ---------------------------------------------------------------------------------------------
# enumeration


def fixture_role_choices(roles: Sequence[RoleSpec]) -> Iterator[dict[str, str]]:
    """Every pick of the fixture roles (role -> fixture id) that keeps each ``unlike`` apart,
    in a fixed order (the product of the ``among`` lists, first role slowest)."""
    fixture_roles = [r for r in roles if isinstance(r, FixtureRole)]
    for combo in itertools.product(*(r.among for r in fixture_roles)):
        picks = {r.name: fid for r, fid in zip(fixture_roles, combo, strict=True)}
        if all(picks[r.name] != picks[o] for r in fixture_roles for o in r.unlike):
            yield picks


def _role_values(role: RoleSpec) -> list[RoleValue]:
    """Every value a role other than a fixture role can take."""
    if isinstance(role, OrderRole):
        return list(itertools.permutations(role.fixtures))
    if isinstance(role, VariantRole):
        return list(range(len(role.options)))
    if isinstance(role, ReorderRole):
        return list(itertools.permutations(role.instructions))
    raise TypeError(f"fixture role {role.name!r} has no independent values")


def _assemble(
    roles: Sequence[RoleSpec], picks: Mapping[str, str], others: Mapping[str, RoleValue]
) -> Assignment:
    values: list[tuple[str, RoleValue]] = []
    for role in roles:
        values.append((role.name, picks[role.name] if isinstance(role, FixtureRole)
                       else others[role.name]))
    return Assignment(tuple(values))


def role_assignments(scenario: Scenario) -> list[Assignment]:
    """Every assignment the scenario's roles allow (one empty assignment without roles).

    The list is the product of the fixture-role picks and every other role's values; it can be
    large for long ``permute`` or ``reorder`` lists (n! each).
    """
    template = scenario.layout
    if template is None:
        return [Assignment()]
    roles = template.roles
    others = [r for r in roles if not isinstance(r, FixtureRole)]
    other_values = [_role_values(r) for r in others]
    result = []
    for picks in fixture_role_choices(roles):
        for combo in itertools.product(*other_values):
            chosen = {r.name: v for r, v in zip(others, combo, strict=True)}
            result.append(_assemble(roles, picks, chosen))
    return result


def layout_rng(seed: int) -> np.random.Generator:
    """The random stream a seed's role draws come from."""
    if seed < 0:
        raise ValueError(f"a layout seed must not be negative, got {seed}")
    return np.random.default_rng([int(seed), LAYOUT_STREAM])


def draw_assignment(roles: Sequence[RoleSpec], rng: np.random.Generator) -> Assignment:
    """One assignment, uniform over every assignment the roles allow.

    Raises:
        ValueError: the fixture roles' ``unlike`` lists leave no pick (parsing refuses such
            roles, so only hand-built roles can get here).
    """
    picks_all = list(fixture_role_choices(roles))
    if not picks_all:
        raise ValueError("the fixture roles leave no pick that keeps every unlike apart")
    picks = picks_all[int(rng.integers(len(picks_all)))]
    others: dict[str, RoleValue] = {}
    for role in roles:
        if isinstance(role, OrderRole):
            others[role.name] = tuple(role.fixtures[int(i)]
                                      for i in rng.permutation(len(role.fixtures)))
        elif isinstance(role, VariantRole):
            others[role.name] = int(rng.integers(len(role.options)))
        elif isinstance(role, ReorderRole):
            others[role.name] = tuple(role.instructions[int(i)]
                                      for i in rng.permutation(len(role.instructions)))
    return _assemble(roles, picks, others)


def assignment_for_seed(scenario: Scenario, seed: int) -> Assignment:
    """The assignment :func:`generate_layout` uses for ``seed`` (empty without roles)."""
    if scenario.layout is None:
        return Assignment()
    return draw_assignment(scenario.layout.roles, layout_rng(seed))


# ---------------------------------------------------------------------------------------------
# resolution


def _resolver(picks: Mapping[str, str]) -> dict[str, str]:
    return {f"{ROLE_PREFIX}{name}": fid for name, fid in picks.items()}


def _as_index(value: RoleValue, role: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"role {role!r} needs an option index, got {value!r}")
    return value


def _as_sequence(value: RoleValue, role: str) -> tuple[str | int, ...]:
    if not isinstance(value, tuple):
        raise TypeError(f"role {role!r} needs a sequence, got {value!r}")
    return value


def _fix(value: str | None, refs: Mapping[str, str]) -> str | None:
    if value is None or not is_role_ref(value):
        return value
    return refs[value]


def _fix_id(value: str, refs: Mapping[str, str]) -> str:
    return refs[value] if is_role_ref(value) else value


def _resolve_fixtures(
    template: LayoutTemplate, assignment: Assignment
) -> tuple[FixtureSpec, ...]:
    locked = {str(assignment[r.name]) for r in template.roles
              if isinstance(r, FixtureRole) and r.locked}
    y_of = {f.id: f.y for f in template.fixtures}
    new_y: dict[str, float] = {}
    for role in template.roles:
        if isinstance(role, OrderRole):
            order = _as_sequence(assignment[role.name], role.name)
            for place, fid in zip(role.fixtures, order, strict=True):
                new_y[str(fid)] = y_of[place]
    return tuple(
        replace(f, y=new_y.get(f.id, f.y), locked=f.locked or f.id in locked)
        for f in template.fixtures
    )


def _merge_variant(base: VariantSpec, option: VariantSpec) -> VariantSpec:
    """``base`` with every field ``option`` sets replaced."""
    changes = {
        f.name: getattr(option, f.name)
        for f in fields(option)
        if getattr(option, f.name) is not None
    }
    return replace(base, **changes)


def _resolve_objects(
    template: LayoutTemplate, assignment: Assignment, refs: Mapping[str, str]
) -> tuple[ObjectSpec, ...]:
    looks: dict[str, VariantSpec] = {}
    for role in template.roles:
        if isinstance(role, VariantRole):
            option = role.options[_as_index(assignment[role.name], role.name)]
            for oid in role.objects:
                looks[oid] = option
    return tuple(
        replace(
            o,
            fixture=_fix_id(o.fixture, refs),
            variant=_merge_variant(o.variant, looks[o.id]) if o.id in looks else o.variant,
        )
        for o in template.objects
    )


def _resolve_criterion(crit: CriterionSpec, refs: Mapping[str, str]) -> CriterionSpec:
    return replace(
        crit,
        fixture=_fix(crit.fixture, refs),
        answer=tuple(_fix_id(a, refs) for a in crit.answer),
    )


def _resolve_move(move: MoveSpec, refs: Mapping[str, str]) -> MoveSpec:
    return replace(move, fixture=_fix_id(move.fixture, refs))


def _resolve_instructions(
    template: LayoutTemplate, assignment: Assignment, refs: Mapping[str, str]
) -> tuple[InstructionSpec, ...]:
    resolved = [
        replace(
            instr,
            start_at=_fix(instr.start_at, refs),
            moves=tuple(_resolve_move(m, refs) for m in instr.moves),
            success=tuple(_resolve_criterion(c, refs) for c in instr.success),
            failure=tuple(_resolve_criterion(c, refs) for c in instr.failure),
        )
        for instr in template.instructions
    ]
    ordered = list(resolved)
    for role in template.roles:
        if isinstance(role, ReorderRole):
            sequence = _as_sequence(assignment[role.name], role.name)
            for place, source in zip(sorted(role.instructions), sequence, strict=True):
                ordered[place] = resolved[int(source)]
    return tuple(ordered)


def apply_assignment(scenario: Scenario, assignment: Assignment) -> Scenario:
    """The concrete scenario of one assignment of ``scenario``'s roles.

    Raises:
        KeyError: the assignment lacks one of the roles.
        ValueError: the scenario has no roles but the assignment is not empty.
    """
    template = scenario.layout
    if template is None:
        if assignment.values:
            raise ValueError(f"scenario {scenario.name!r} has no roles to assign")
        return scenario
    picks = {r.name: str(assignment[r.name]) for r in template.roles
             if isinstance(r, FixtureRole)}
    refs = _resolver(picks)
    return replace(
        scenario,
        fixtures=_resolve_fixtures(template, assignment),
        objects=_resolve_objects(template, assignment, refs),
        instructions=_resolve_instructions(template, assignment, refs),
        start_at=_fix(template.start_at, refs),
        assignment=assignment,
    )


def generate_layout(scenario: Scenario, seed: int) -> Scenario:
    """The concrete scenario ``seed`` chooses; a scenario without roles comes back unchanged.

    The result keeps the roles (its ``layout``), so it can be generated again for another seed,
    records the assignment, and carries ``seed`` as its seed.

    Raises:
        ValueError: ``seed`` is negative.
    """
    if scenario.layout is None:
        return scenario
    concrete = apply_assignment(scenario, assignment_for_seed(scenario, seed))
    return replace(concrete, seed=int(seed))
