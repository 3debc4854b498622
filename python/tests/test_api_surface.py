"""The public surface: every name in duro.__all__ exists, has a docstring,
and so do its public methods and properties; py.typed ships beside it; and
the public functions carry type annotations (issue 24: type hints shipped,
docstrings on every public name)."""
import inspect
import os

import duro


def _public_members(obj):
    for name, member in vars(obj).items():
        if name.startswith("_"):
            continue
        yield name, member


def _doc(member):
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if isinstance(member, property):
        return member.fget.__doc__ if member.fget else None
    return getattr(member, "__doc__", None)


def _is_documentable(member):
    # Python functions and properties, and the C extension's methods and
    # attributes (method and getset descriptors)
    return isinstance(member, (property, staticmethod, classmethod)) or (
        inspect.isfunction(member) or inspect.ismethoddescriptor(member) or
        inspect.isdatadescriptor(member))


def test_every_public_name_is_documented():
    missing = []
    for name in duro.__all__:
        assert hasattr(duro, name), f"duro.__all__ names {name}, not defined"
        obj = getattr(duro, name)
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj) and obj.__module__.startswith("duro"):
            for mname, member in _public_members(obj):
                if _is_documentable(member) and not (_doc(member) or
                                                     "").strip():
                    missing.append(f"{name}.{mname}")
    assert not missing, f"public names without a docstring: {missing}"


def test_public_functions_are_annotated():
    unannotated = []
    for name in duro.__all__:
        obj = getattr(duro, name)
        if not inspect.isclass(obj) or not obj.__module__.startswith("duro"):
            continue
        for mname, member in _public_members(obj):
            if isinstance(member, property):
                member = member.fget
            elif isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if not inspect.isfunction(member):
                continue
            sig = inspect.signature(member)
            if sig.return_annotation is inspect.Signature.empty and \
                    mname != "__init__":
                unannotated.append(f"{name}.{mname} (return)")
            for p in sig.parameters.values():
                if p.name in ("self", "cls") or p.kind in (
                        p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if p.annotation is inspect.Parameter.empty:
                    unannotated.append(f"{name}.{mname}({p.name})")
    assert not unannotated, f"public functions without hints: {unannotated}"


def test_py_typed_ships_beside_the_package():
    assert os.path.isfile(os.path.join(os.path.dirname(duro.__file__),
                                       "py.typed"))
