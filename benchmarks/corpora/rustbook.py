"""A sixth corpus nobody tuned chunkwise on: The Rust Programming Language, with 85 hand-written questions.

Fifty-seven pages of the book that Debian's ``rust-doc`` 1.63.0+dfsg1-2 package installs under
``/usr/share/doc/rust-doc/html/book`` (:data:`PAGES`: every page of chapters 3 to 11, 13, 15 and 16:
common concepts, ownership, structs, enums, modules, collections, error handling, generics, traits
and lifetimes, tests, closures and iterators, smart pointers, concurrency), about 675,000 characters
(168,000 cl100k tokens) as chunkwise converts them. The questions
(``benchmarks/data/rustbook/questions.yaml``) were written for this benchmark by reading those pages, in a
Rust learner's words rather than the book's; each names its page and one or two verbatim excerpts.
No chunkwise default or search space was chosen by looking at it.

    apt-get download rust-doc     # rust-doc_1.63.0+dfsg1-2_all.deb (Debian 12, bookworm)
    python benchmarks/corpora/rustbook.py build --deb rust-doc_1.63.0+dfsg1-2_all.deb [--root DIR]

``build`` unpacks the .deb (``dpkg-deb -x``) into a temporary folder, copies the pages into
``ROOT/raw`` (default ``~/.cache/chunkwise-bench/rustbook``; any other file there is removed: the
corpus is the folder), prints each one's sha256 beside the one the questions were written against (a
different Debian version may move an excerpt; the build then says which), loads them as chunkwise
does (corpus ``rustbook``), locates every excerpt exactly once (any whitespace between its words, a
backtick optional: ``_corpus.locate``) and writes ``ROOT/questions.jsonl``; it ends with
``chunkwise validate``. A question any of whose excerpts is not found is left out and reported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import DATA
from benchmarks._corpus import BenchError, build_located, copy_pinned, unpacked_deb

CORPUS = "rustbook"
QUESTIONS = DATA / "rustbook" / "questions.yaml"
DEFAULT_ROOT = Path.home() / ".cache" / "chunkwise-bench" / CORPUS
#: The package the pages come from, and its sha256 (Debian 12's rust-doc_1.63.0+dfsg1-2_all.deb).
DEB = "rust-doc_1.63.0+dfsg1-2_all.deb"
DEB_SHA256 = "96ef96fe6df87d939ca713bd7df3d15c2b778ccb892eca025c4ee504146f697b"
#: Where the book lies inside the package.
BOOK = Path("usr/share/doc/rust-doc/html/book")
#: The pages, with the sha256 of the rust-doc 1.63.0+dfsg1-2 copies the questions were written on.
PAGES = {
    "ch03-00-common-programming-concepts.html": "f4d0162cd210b2acd7b1e870e26c82c1957e12d1b0eb66ccf495a16baca0ea84",
    "ch03-01-variables-and-mutability.html": "efedbb78d9d3bf00e9022ce050fd6931419056e09251c81c2d8761dc6981fc56",
    "ch03-02-data-types.html": "0b1780f24d1dba059109bb896d709c72c050c9f7e50e259703fa95ab6806e9c8",
    "ch03-03-how-functions-work.html": "7f6b8a64a4d37f5aae42c6d2a7765d9f3e4f8b541055e2f19d4bbf7e31df1b6c",
    "ch03-04-comments.html": "8221a682227a816ceabe7e16b023d820fc2d6aa9a8316822fd6886bb64f28b08",
    "ch03-05-control-flow.html": "e5bb858a668d1b74b75ffa57c227c5621d807d78b8c7455a46ebd4e60d68f3a7",
    "ch04-00-understanding-ownership.html": "82491ad9eae260079aceb674446698138f7708b6f83e31eb18596d5f5e8e193b",
    "ch04-01-what-is-ownership.html": "b0e1b9e76214442eeb38cf20f33857964f651bf22d49d1e7425d9466f7edb1b0",
    "ch04-02-references-and-borrowing.html": "09494a2f10d93c939ff2a0ebe1170c130be2e5a31fd602df1b7316ddf4f145f5",
    "ch04-03-slices.html": "303a031ef7b621c5632236cb8cbe166ca764f8c5a40a6c33c0e743ed8ff0b010",
    "ch05-00-structs.html": "c201314a6441737856cb291a0ad4da39493c9fc4584cb058202b713536013ee9",
    "ch05-01-defining-structs.html": "7634de850504cfead84544e9e287dc01ab2f15905cc7e0aedf26affb2ebc0d0e",
    "ch05-02-example-structs.html": "9d861553f7b69a6ac690d88e6f3cf61ce9c33e35f73ff0e332b49c5c150b6ad2",
    "ch05-03-method-syntax.html": "097349e9757dae06ee995731f13b7aacc8725f24c1915559b7e5f69c77f99866",
    "ch06-00-enums.html": "9a80b89924104e9cdc5484c6936fe73d134571d857efb7780147c314feddd2b9",
    "ch06-01-defining-an-enum.html": "7554d4f0a51fdfff0eac9e8ab8502152331bae372df39a9aeab27d27010dcad7",
    "ch06-02-match.html": "3d337bac3e3fcaf6b6490ef6819705a6ee9b25c6602bbd60167723a4aecb6f2b",
    "ch06-03-if-let.html": "6c5e9d6ad5dedf37d7e4665a9a9ee0b20577037f0b94194512fd7e5b9b079ea2",
    "ch07-00-managing-growing-projects-with-packages-crates-and-modules.html":
        "1521661ebede97a28c245a6c9d1a6b45e155767422e70e0cfee0fde6bb3e196f",
    "ch07-01-packages-and-crates.html": "08be78e5fcc5583e967eb690615ca5bb33da7009bc44a53df26aa4ee5ff0e39f",
    "ch07-02-defining-modules-to-control-scope-and-privacy.html":
        "21dccbf2e9b184e616a4bad2bb669ffe201a2ff3e0ad0282709d17af79bf7dc0",
    "ch07-03-paths-for-referring-to-an-item-in-the-module-tree.html":
        "0258d80b9f911267b3c3b2c5adf18cadf1c59c3eeb7c3fe0a0bb91f4d15b1a93",
    "ch07-04-bringing-paths-into-scope-with-the-use-keyword.html":
        "66ae4f2a291741c5bd392716be695beedcb20e110a657485adfe869bd3b061dc",
    "ch07-05-separating-modules-into-different-files.html":
        "ebb568b2a632b00aedd1f2221cc2ee500b9ba19cd90fac6d8e763bce0c1985ea",
    "ch08-00-common-collections.html": "0a61ea6a072dbc6cc178360322fe38ed15af4860c68e6b0a5e1c2bd39ae4457d",
    "ch08-01-vectors.html": "d81ddb2a43075fd6a86c52766394990d3453ab3e4e699d5679edee9d44de52a6",
    "ch08-02-strings.html": "0e84a037beac466d7c16e74620bb1b9cb8038c20d478519ce8067d82e95b66fa",
    "ch08-03-hash-maps.html": "c43f5bc29d41eb9397eaa1c6ee1fe3fef8c1dfc14a30b0daf7c51bd78f99f9f6",
    "ch09-00-error-handling.html": "0f0cc91f4168deef2cc19630dc906ca0da0da82ce12707ba185878c1fd84d982",
    "ch09-01-unrecoverable-errors-with-panic.html": "552b08a977600b5948768e5c49af6000ddf4e7fa4e1d0df45fcb7793731f0571",
    "ch09-02-recoverable-errors-with-result.html": "3a2d17d9343aff79032fbc8fe38112e682fb1f8840967b771dc3c5a370222137",
    "ch09-03-to-panic-or-not-to-panic.html": "b9e18e8545b448f0c8ff737488021e917de5a8742c92edf056ab4dc4866291b3",
    "ch10-00-generics.html": "d1450837f538dfc0d3e5f1e4697293543b1570806f3cf8fb5debe6b05a0c1a99",
    "ch10-01-syntax.html": "8eab7f6680467e6679ce28c6a90dad3d2ba30317e77b5343b0f5818ad5c5555a",
    "ch10-02-traits.html": "c58cdc03d5ec4a258b7eaae64838431d5dbbe9e4502efa46ec53ad134c6a164f",
    "ch10-03-lifetime-syntax.html": "c8c9238b77ad7be85bb008052fab4f24d05dfbb2e95b863b2939e1f7e8b6ea9e",
    "ch11-00-testing.html": "90b6edca2a3373f5cc5783644014c6c18fe14a67aa2bd8087150fc5a01faa6d8",
    "ch11-01-writing-tests.html": "3e7f632b2bda5c02bc75686dd7a3f7b1d4999b446d1c32c06f9783e6d1f1b4a9",
    "ch11-02-running-tests.html": "5c67e8f41abe941d7e9be3a452d3f63ff344a2a664ad9920b897dfe70cc31844",
    "ch11-03-test-organization.html": "abf5a4313716ec777cfb82003890d2263c934cb5683fe674bb1cd66eb0f8c7df",
    "ch13-00-functional-features.html": "c34f05c20565169e2721cf96a8234e9acecc50caaf371089ab57d90097802452",
    "ch13-01-closures.html": "040b64e9b1798827f2215477a1d90fbd3fa1b627aff9a8adf2f68b0fad3afd87",
    "ch13-02-iterators.html": "4e0fc126605a6bb385906ce7879da2ebf04cef411554409e9cef8a2604b66700",
    "ch13-03-improving-our-io-project.html": "e1640d2bfda69c649dee5aadb111aa7a3ea305036a047585115dc8e059fc0595",
    "ch13-04-performance.html": "08e6aa442135bc774b7fa94b5fc5a3ff6024710fc7465f6f7356d4ce3b73cd83",
    "ch15-00-smart-pointers.html": "8b3be8f12fc4e4967cde8056b1b9a36893b238d8f217355e4dfe9ef3f292d659",
    "ch15-01-box.html": "d1e3683cf360ec40a9322ef0e20421e6919c34d307c8d55084d17cc509026093",
    "ch15-02-deref.html": "3385ca8d86e288a4c1be10af581e113cbf8380d903fde1ad9042553124c5102a",
    "ch15-03-drop.html": "2092ac0ec520bd2ba5f68cda392cdaca1567a612d41c0ed5ab7fa962cb7a2834",
    "ch15-04-rc.html": "29ab636db7f754e4a07a18564e7913f7d2de3ff4fa319e5d4cbb253f43cb9c76",
    "ch15-05-interior-mutability.html": "db70b856f4f72cd89103065d8d8f4032c832f225c153850f4c2b26deec67c337",
    "ch15-06-reference-cycles.html": "e4f1057625cfd348841aecb314e864a6586e83110c041a191cb774d9570d2213",
    "ch16-00-concurrency.html": "b129986d8fe16dcd511446b2882609b137df4a54da26bef575667304d2bccc28",
    "ch16-01-threads.html": "625d040a50d9fcf56c5a15ad88310a3949a2f15c081ddbabfaa5a98fdc382d2e",
    "ch16-02-message-passing.html": "da1c0ae433d16ebda79c7018037d76757c78c2eb01643ecbba253eaa5827c3a1",
    "ch16-03-shared-state.html": "d6f28ce0e9faab45359e352e30dec476dc259706a9058d7b557457eeec44ca18",
    "ch16-04-extensible-concurrency-sync-and-send.html":
        "44122739498d59bf1fca5be5844dcada99253c402e5fd4de7dba1804fa2b1e91",
}


def build(root: Path, deb: Path) -> int:
    with unpacked_deb(deb, DEB_SHA256, f"get it with `apt-get download rust-doc` ({DEB})") as unpacked:
        copy_pinned(PAGES, unpacked / BOOK, root / "raw",
                    lambda page: f"{deb.name} has no {BOOK / page}: is it Debian's rust-doc ({DEB})?")
    return build_located(root, root / "raw", CORPUS, QUESTIONS)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="unpack the pages, locate the excerpts, write questions.jsonl")
    build_parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"where to build ({DEFAULT_ROOT})")
    build_parser.add_argument("--deb", type=Path, help=f"Debian's {DEB} (`apt-get download rust-doc`)")
    return parser


def main() -> int:
    args = parser().parse_args()
    if args.deb is None:
        print(f"rustbook: give --deb {DEB}; get it with `apt-get download rust-doc` (Debian 12, bookworm; "
              f"sha256 {DEB_SHA256})", file=sys.stderr)
        return 2
    try:
        return build(args.root.expanduser().resolve(), args.deb.expanduser())
    except BenchError as exc:
        print(f"rustbook: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
