"""The bundled routing examples: libraries of six skills whose domains overlap, with vague
seed descriptions, and a trigger set over them (train, val, test). ``write_example`` writes one
for tests, ``bench/bench_routing.py`` and anyone who wants to try ``skillvc train --routing``
offline with ``sim:routing``.

``documents`` (the default, below): six document-format skills; every prompt names its format,
so a selector routes much of it from the skill names alone. ``support``
(``skillvc.routing.example_support``): six customer-support queues where a house policy, written
only in the labels, decides, and the prompts do not name their skill."""

from __future__ import annotations

import json
import random
from pathlib import Path

from skillvc.routing import example_support

# name -> (seed description, the request kinds that belong to it)
SKILLS: dict[str, tuple[str, list[str]]] = {
    "pdf": (
        "Work with documents.",
        [
            "Extract the text from this scanned PDF invoice",
            "Fill in the form fields of the PDF application",
            "Merge these three PDF files into one",
            "Split the PDF report into one file per chapter",
            "Add a watermark to every page of the PDF",
            "Run OCR on the scanned PDF contract",
            "Rotate the landscape pages in this PDF",
            "Flatten the annotations of the PDF brochure",
            "Extract the embedded images from the PDF manual",
            "Compress the PDF so it fits in an email",
            "Redact the account numbers in the PDF statement",
            "Sign the PDF lease with my signature image",
            "Convert the PDF pages to PNG images",
            "Find the page of the PDF that mentions the warranty",
            "Encrypt the PDF with a password",
        ],
    ),
    "docx": (
        "Work with documents and text.",
        [
            "Track changes in this Word document and accept the edits",
            "Add a table of contents to the Word report",
            "Write the cover letter as a Word docx file",
            "Insert page numbers in the footer of the Word document",
            "Apply the heading styles of our Word template",
            "Add reviewer comments to the docx draft",
            "Replace the company name throughout the Word contract",
            "Make a mail merge of the Word letter for every customer",
            "Convert the Markdown notes into a Word docx",
            "Set the margins and line spacing of the Word essay",
            "Insert a footnote citing the source in the docx paper",
            "Compare two versions of the Word policy and show the redline",
            "Add a header with the logo to the Word memo",
            "Fix the numbered list formatting in the docx minutes",
            "Export the Word document sections as separate docx files",
        ],
    ),
    "xlsx": (
        "Work with data files.",
        [
            "Write a VLOOKUP formula in the Excel spreadsheet",
            "Build a pivot table from the Excel sales workbook",
            "Add conditional formatting to the overdue cells of the spreadsheet",
            "Recalculate the formulas in the Excel budget workbook",
            "Make a chart from the quarterly figures in the spreadsheet",
            "Freeze the header row of the Excel sheet",
            "Add a dropdown validation list to the spreadsheet column",
            "Merge the Excel workbooks into one sheet per region",
            "Fix the circular reference in the spreadsheet formulas",
            "Protect the Excel workbook cells with the totals",
            "Convert the spreadsheet dates to ISO format with a formula",
            "Add a SUMIFS formula for each product to the workbook",
            "Create a named range in the Excel model",
            "Sort the spreadsheet by the due date column",
            "Highlight duplicate cells in the Excel sheet",
        ],
    ),
    "pptx": (
        "Make slides.",
        [
            "Create a PowerPoint deck for the quarterly review",
            "Add speaker notes to every slide of the presentation",
            "Apply our brand theme to the PowerPoint presentation",
            "Turn this outline into a slide deck",
            "Insert a chart slide into the pitch deck",
            "Add transitions between the presentation slides",
            "Export the PowerPoint slides as images",
            "Reorder the slides of the deck by topic",
            "Make a title slide for the conference talk presentation",
            "Replace the logo on the slide master of the deck",
            "Shorten the text on the crowded presentation slides",
            "Add a timeline slide to the project deck",
            "Put the team photos on one slide of the presentation",
            "Convert the slide deck to a handout with notes",
            "Embed the demo video in the PowerPoint slide",
        ],
    ),
    "csv": (
        "Work with data.",
        [
            "Parse the CSV export and count rows per country",
            "Convert the semicolon delimited CSV to comma delimited",
            "Deduplicate the rows of the CSV file by email",
            "Join the two CSV files on the customer id column",
            "Fix the encoding of the CSV file so accents show",
            "Load the CSV log and find the rows with errors",
            "Split the large CSV file into chunks of ten thousand rows",
            "Validate the CSV columns against the schema",
            "Sort the CSV rows by timestamp",
            "Turn the JSON records into a CSV file with a header",
            "Quote the CSV fields that contain commas",
            "Drop the empty columns from the CSV dataset",
            "Sum the amount column of the CSV transactions",
            "Filter the CSV rows where status is failed",
            "Rename the CSV header columns to snake case",
        ],
    ),
    "markdown": (
        "Write text files.",
        [
            "Write the README in Markdown with install instructions",
            "Fix the broken links in the Markdown docs",
            "Convert the HTML page to Markdown",
            "Add a Markdown table of the API endpoints to the docs",
            "Format the changelog in Markdown with version headings",
            "Lint the Markdown files for heading levels",
            "Add code fences with language tags to the Markdown guide",
            "Write the contributing guide as a Markdown file",
            "Generate a Markdown table of contents for the long doc",
            "Turn the meeting notes into a Markdown checklist",
            "Add front matter to the Markdown blog posts",
            "Escape the underscores in the Markdown text",
            "Render the Markdown tutorial to check the headings",
            "Write the release notes in Markdown bullets",
            "Link the Markdown pages of the wiki together",
        ],
    ),
}

NO_SKILL = [
    "What is the capital of Australia",
    "Tell me a joke about cats",
    "How many minutes are in a week",
    "Suggest a name for my bakery",
    "What is the weather like on Mars",
    "Translate good morning into Spanish",
    "Recommend a good science fiction novel",
    "How do I boil an egg",
    "Explain photosynthesis simply",
    "What year did the first moon landing happen",
]


# library -> (skills as above, the prompts that want no skill)
LIBRARIES: dict[str, tuple[dict[str, tuple[str, list[str]]], list[str]]] = {
    "documents": (SKILLS, NO_SKILL),
    "support": (example_support.SKILLS, example_support.NO_SKILL),
}


def trigger_items(library: str = "documents") -> dict[str, list[dict[str, object]]]:
    """The trigger set's splits: per skill 9 train, 3 val, 3 test prompts; the prompts that
    want no skill 4 / 3 / 3. Deterministic."""
    skills, no_skill = LIBRARIES[library]
    splits: dict[str, list[dict[str, object]]] = {"train": [], "val": [], "test": []}
    for name, (_, prompts) in skills.items():
        order = list(prompts)
        random.Random(f"routing-example:{name}").shuffle(order)
        for split, part in (("train", order[:9]), ("val", order[9:12]), ("test", order[12:])):
            for k, prompt in enumerate(part):
                splits[split].append({"id": f"{name}-{split}-{k}", "input": prompt, "skill": name})
    for split, part in (("train", no_skill[:4]), ("val", no_skill[4:7]), ("test", no_skill[7:])):
        for k, prompt in enumerate(part):
            splits[split].append({"id": f"none-{split}-{k}", "input": prompt, "skill": None})
    return splits


def write_example(
    root: Path,
    *,
    library: str = "documents",
    selector: str = "sim:routing",
    optimizer: str = "sim:routing",
) -> None:
    """The library (a key of ``LIBRARIES``) under ``root/skills``, the trigger files under
    ``root/evals/routing`` and a ``skillvc.toml`` naming them (the caller commits them)."""
    tables = []
    for name, (description, _) in LIBRARIES[library][0].items():
        path = root / "skills" / name / "SKILL.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n"
            f"How to handle {name} requests.\n",
            encoding="utf-8",
        )
        tables.append(f'[skills.{name}]\npath = "skills/{name}/SKILL.md"\n')
    folder = root / "evals" / "routing"
    folder.mkdir(parents=True, exist_ok=True)
    for split, items in trigger_items(library).items():
        lines = "".join(json.dumps(item) + "\n" for item in items)
        (folder / f"{split}.jsonl").write_text(lines, encoding="utf-8")
    (root / "skillvc.toml").write_text(
        f'[target]\nmodel = "{selector}"\n\n[optimizer]\nmodel = "{optimizer}"\n\n'
        "[train]\nepochs = 2\nbatch_size = 20\nworkers = 4\n\n"
        '[routing]\ntrain = "evals/routing/train.jsonl"\nval = "evals/routing/val.jsonl"\n'
        'test = "evals/routing/test.jsonl"\n\n' + "\n".join(tables),
        encoding="utf-8",
    )
