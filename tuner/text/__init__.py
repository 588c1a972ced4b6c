"""Text primitives with exact offsets: cl100k tokens (:mod:`.tokens`), sentences
(:mod:`.sentences`) and markdown headings (:mod:`.outline`)."""
