"""A small document model for reports, rendered as one self-contained HTML page (figures inline as
base64 PNG, no external assets) and as Markdown (figures written next to it as PNG files)."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Callout:
    """A banner; tone: info, good, warn or bad."""

    text: str
    tone: str = "info"


@dataclass(frozen=True)
class Hero:
    """Headline figures: (value, label) cards."""

    cards: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Figure:
    name: str  # file name in Markdown output, e.g. "islands.png"
    png: bytes
    caption: str


@dataclass(frozen=True)
class Code:
    text: str
    lang: str = "python"
    title: str = ""


@dataclass(frozen=True)
class Diff:
    text: str
    title: str = ""


Block = Heading | Para | Callout | Hero | Table | Figure | Code | Diff


@dataclass
class Doc:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> Doc:
        self.blocks.extend(blocks)
        return self


def table(head: Sequence[str], rows: Sequence[Sequence[object]], caption: str = "") -> Table:
    return Table(tuple(head), tuple(tuple(str(c) for c in r) for r in rows), caption)


CSS = """
body{font-family:-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#1d2430;background:#f6f7f9;
margin:0;line-height:1.45}
main{max-width:1120px;margin:0 auto;padding:24px 32px 60px;background:#fff;min-height:100vh}
h1{font-size:26px;margin:4px 0 14px}h2{font-size:20px;margin:34px 0 10px;padding-bottom:4px;
border-bottom:2px solid #e3e7ee}h3{font-size:16px;margin:22px 0 8px}
.hero{display:flex;flex-wrap:wrap;gap:12px;margin:14px 0}
.card{flex:1 1 180px;background:#f0f4fa;border-radius:10px;padding:12px 16px;border:1px solid #dce4f0}
.card .v{font-size:26px;font-weight:700;color:#1b4f9c;word-break:break-word}.card .l{font-size:13px;color:#4a5568}
.callout{border-radius:8px;padding:10px 14px;margin:12px 0;border:1px solid;font-size:15px}
.info{background:#eef5ff;border-color:#b9d3f5}.good{background:#ecf8ef;border-color:#a9dcb5}
.warn{background:#fff7e6;border-color:#f3cf85}.bad{background:#fdecec;border-color:#f0b1b1}
table{border-collapse:collapse;margin:8px 0 6px;font-size:13.5px;display:block;overflow-x:auto}
th,td{border:1px solid #dde2ea;padding:5px 9px;text-align:left;vertical-align:top;white-space:pre-line}
th{background:#eef1f6;font-weight:600}tr:nth-child(even) td{background:#fafbfd}
caption{caption-side:bottom;text-align:left;font-size:12px;color:#5a6474;padding-top:4px}
figure{margin:14px 0}figure img{max-width:100%;border:1px solid #e3e7ee;border-radius:6px}
figcaption{font-size:13px;color:#4a5568;margin-top:4px}
pre{background:#f5f7fa;border:1px solid #e1e6ee;border-radius:6px;padding:10px 12px;overflow-x:auto;font-size:12.5px;
line-height:1.35}code{font-family:"SFMono-Regular",Consolas,"DejaVu Sans Mono",monospace}
.add{background:#e6f6ea;color:#14532d;display:block}.del{background:#fde8e8;color:#7f1d1d;display:block}
.hunk{color:#6b46c1;display:block}.ctx{display:block}
.codetitle{font-size:13px;font-weight:600;margin:12px 0 2px;color:#374151}
.broken{color:#b91c1c;font-weight:600}
"""

SCRIPT = """
document.querySelectorAll('img').forEach(function (img) {
  function mark() {
    var ok = img.complete && img.naturalWidth > 0;
    img.dataset.rendered = ok ? 'yes' : 'no';
    if (!ok) { img.insertAdjacentHTML('afterend', '<p class="broken">figure failed to load: ' + img.alt + '</p>'); }
  }
  if (img.complete) { mark(); } else { img.addEventListener('load', mark); img.addEventListener('error', mark); }
});
"""


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _diff_html(text: str) -> str:
    out = []
    for line in text.splitlines():
        cls = ("hunk" if line.startswith("@@") else "add" if line.startswith("+") and not line.startswith("+++")
               else "del" if line.startswith("-") and not line.startswith("---") else "ctx")
        out.append(f'<span class="{cls}">{_e(line) or " "}</span>')
    return "".join(out)  # every line is a block of its own


def _html_block(b: Block) -> str:
    if isinstance(b, Heading):
        return f"<h{b.level}>{_e(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        return f"<p>{_e(b.text)}</p>"
    if isinstance(b, Callout):
        return f'<div class="callout {b.tone}">{_e(b.text)}</div>'
    if isinstance(b, Hero):
        cards = "".join(f'<div class="card"><div class="v">{_e(v)}</div><div class="l">{_e(lab)}</div></div>'
                        for v, lab in b.cards)
        return f'<div class="hero">{cards}</div>'
    if isinstance(b, Table):
        head = "".join(f"<th>{_e(h)}</th>" for h in b.head)
        thead = f"<thead><tr>{head}</tr></thead>" if any(b.head) else ""  # a key-value table has no header
        rows = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in b.rows)
        cap = f"<caption>{_e(b.caption)}</caption>" if b.caption else ""
        return f"<table>{cap}{thead}<tbody>{rows}</tbody></table>"
    if isinstance(b, Figure):
        data = base64.b64encode(b.png).decode()
        return (f'<figure><img src="data:image/png;base64,{data}" alt="{_e(b.caption)}">'
                f"<figcaption>{_e(b.caption)}</figcaption></figure>")
    if isinstance(b, Code):
        title = f'<div class="codetitle">{_e(b.title)}</div>' if b.title else ""
        return f"{title}<pre><code>{_e(b.text)}</code></pre>"
    title = f'<div class="codetitle">{_e(b.title)}</div>' if b.title else ""
    return f"{title}<pre><code>{_diff_html(b.text)}</code></pre>"


def to_html(doc: Doc) -> str:
    body = "\n".join(_html_block(b) for b in doc.blocks)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(doc.title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>\n'
            f"<body><main>\n<h1>{_e(doc.title)}</h1>\n{body}\n</main><script>{SCRIPT}</script></body></html>\n")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _md_block(b: Block, figures: Path, rel: str) -> str:
    if isinstance(b, Heading):
        return f"{'#' * b.level} {b.text}"
    if isinstance(b, Para):
        return b.text
    if isinstance(b, Callout):
        return f"> **{b.tone.upper()}**: {b.text}"
    if isinstance(b, Hero):
        return "\n".join(f"- **{v}** {lab}" for v, lab in b.cards)
    if isinstance(b, Table):
        lines = ["| " + " | ".join(map(_md_cell, b.head)) + " |", "|" + "|".join("---" for _ in b.head) + "|"]
        lines += ["| " + " | ".join(map(_md_cell, r)) + " |" for r in b.rows]
        return "\n".join(lines) + (f"\n\n*{b.caption}*" if b.caption else "")
    if isinstance(b, Figure):
        figures.mkdir(parents=True, exist_ok=True)
        (figures / b.name).write_bytes(b.png)
        return f"![{b.caption}]({rel}{b.name})\n\n*{b.caption}*"
    fence = "diff" if isinstance(b, Diff) else b.lang
    title = f"**{b.title}**\n\n" if b.title else ""
    return f"{title}```{fence}\n{b.text.rstrip()}\n```"


def to_markdown(doc: Doc, figures: Path, rel: str) -> str:
    """Markdown; figures are written into `figures`, linked as `rel` + name."""
    return f"# {doc.title}\n\n" + "\n\n".join(_md_block(b, figures, rel) for b in doc.blocks) + "\n"


def write(doc: Doc, html_path: Path, md_path: Path, figures: Path) -> None:
    """Both renderings: the HTML page, and Markdown with its figures in `figures`."""
    html_path.write_text(to_html(doc))
    rel = f"{figures.relative_to(md_path.parent).as_posix()}/" if figures != md_path.parent else ""
    md_path.write_text(to_markdown(doc, figures, rel))
