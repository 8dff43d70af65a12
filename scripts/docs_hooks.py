"""MkDocs hooks for the docs site (mkdocs.yml names this file): the HTTP reference page is rendered from
the OpenAPI schema of the app ``brain serve`` runs, so it cannot drift from the routes.

Building the schema opens no store and needs no network: ``create_app`` wires routes and models only;
the store opens when the app is served.
"""

from __future__ import annotations

from typing import Any

#: the line of docs/reference/http.md that the rendered endpoints and schemas replace
OPENAPI_MARKER = "<!-- openapi: rendered from brain.shells.api.create_app().openapi() by scripts/docs_hooks.py -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if OPENAPI_MARKER not in markdown:
        return markdown
    from brain.shells.api import create_app
    from brain.config import Settings

    return markdown.replace(OPENAPI_MARKER, render_openapi(create_app(Settings()).openapi()))


def render_openapi(spec: dict[str, Any]) -> str:
    """Markdown for every operation (grouped by tag, in the schema's order) and every schema."""
    by_tag: dict[str, list[str]] = {}
    for path, operations in spec.get("paths", {}).items():
        for method, op in operations.items():
            tag = (op.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append(_operation(method.upper(), path, op))
    out = []
    for tag, blocks in by_tag.items():
        out += [f"## {tag}", "", *blocks]
    out += ["## Schemas", ""]
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        out += [_schema(name, schema)]
    return "\n".join(out)


def _operation(method: str, path: str, op: dict[str, Any]) -> str:
    lines = [f"### `{method} {path}`", "", f"**{op.get('summary', '')}**", ""]
    if op.get("description"):
        lines += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            lines.append(f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
                         f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |")
        lines.append("")
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body:
        lines += [f"Body: {_type(body)}", ""]
    lines += ["| status | meaning | body |", "|---|---|---|"]
    for status, response in op.get("responses", {}).items():
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        lines.append(f"| {status} | {_cell(response.get('description', ''))} | {_type(schema) if schema else ''} |")
    return "\n".join(lines + [""])


def _schema(name: str, schema: dict[str, Any]) -> str:
    lines = [f"### {name} {{ #{_anchor(name)} }}", ""]
    if schema.get("description"):
        lines += [schema["description"].strip(), ""]
    props = schema.get("properties", {})
    if props:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, sub in props.items():
            lines.append(f"| `{field}` | {_type(sub)} | {'yes' if field in required else 'no'} | "
                         f"{_cell(sub.get('description', ''))} |")
    return "\n".join(lines + [""])


def _type(schema: dict[str, Any]) -> str:
    """A short reading of a JSON Schema: references linked, null shown as optional, ranges kept."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            parts = [_type(s) for s in schema[key] if s.get("type") != "null"]
            nullable = len(parts) < len(schema[key])
            return " or ".join(parts) + (" or null" if nullable else "")
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    words = (("minimum", ">="), ("maximum", "<="), ("minLength", "length >="), ("maxLength", "length <="),
             ("maxItems", "items <="))
    limits = [f"{word} {schema[key]}" for key, word in words if key in schema]
    return kind + (f" ({', '.join(limits)})" if limits else "")


def _anchor(name: str) -> str:
    return f"schema-{name.lower()}"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
