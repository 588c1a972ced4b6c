"""Another corpus nobody tuned chunkwise on: git's documentation, with 72 hand-written questions.

Thirty-one HTML pages that Debian's ``git-doc`` 1:2.39.5-0+deb12u3 package installs under
``/usr/share/doc/git-doc`` (:data:`PAGES`: the Git User's Manual, the two tutorials, giteveryday,
gitrevisions, gitignore, gitattributes and githooks, and the manual pages of twenty-three everyday
commands, from git-bisect to git-worktree; git-config is left out for its length), about 892,000
characters as chunkwise converts them. The questions (``benchmarks/data/gitdocs/questions.yaml``)
were written by hand for this benchmark by reading those pages, in a git user's words rather than
the documentation's; each names its page and one or two verbatim excerpts. No chunkwise default or
search space was chosen by looking at it.

    apt-get download git-doc      # git-doc_1%3a2.39.5-0+deb12u3_all.deb (Debian 12, bookworm)
    python benchmarks/corpora/gitdocs.py build --deb git-doc_1%3a2.39.5-0+deb12u3_all.deb [--root DIR]

``build`` unpacks the .deb (``dpkg-deb -x``) into a temporary folder, copies the pages into
``ROOT/raw`` (default ``~/.cache/chunkwise-bench/gitdocs``; any other file there is removed: the
corpus is the folder), prints each one's sha256 beside the one the questions were written against (a
different Debian version may move an excerpt; the build then says which), loads them as chunkwise
does (corpus ``gitdocs``), locates every excerpt exactly once (any whitespace between its words, a
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

CORPUS = "gitdocs"
QUESTIONS = DATA / "gitdocs" / "questions.yaml"
DEFAULT_ROOT = Path.home() / ".cache" / "chunkwise-bench" / CORPUS
#: The package the pages come from, and its sha256 (Debian 12's git-doc 1:2.39.5-0+deb12u3).
DEB = "git-doc_1%3a2.39.5-0+deb12u3_all.deb"
DEB_SHA256 = "3c89668a11053a6bafade3de1f611f4613db31e082af63f43d8c5b69ad8795ec"
#: Where the HTML documentation lies inside the package (``/usr/share/doc/git/html`` links to it).
HTML = Path("usr/share/doc/git-doc")
#: The pages, with the sha256 of the git-doc 1:2.39.5-0+deb12u3 copies the questions were written on.
PAGES = {
    "user-manual.html": "6a214e62aade7d62c1c6abce4ea6332239b5e946a0a2b30147515aa345eb473c",
    "gittutorial.html": "bdd9a0fc2aa71a4cbb9186586573f70ea30d529f89a3b3650793f3364df7c6ac",
    "gittutorial-2.html": "c146115028c65b476df60bb8d3273689dfdad4c36491a3b7983aa8233c9a1b0f",
    "giteveryday.html": "df6fe74223217f5a8e4223ee951e449b2fcd0ceaafc13be39bc5bb6179d4c2a2",
    "gitrevisions.html": "9d3fc42f9d6f8d0c65c58f7863f4d1d566b706e546f041e1366b0f0c6fded589",
    "gitignore.html": "47fa8f55feff5feffe8381551bc90159144c7c463d92805cb21dccbac3086357",
    "gitattributes.html": "01f0e81e601af207f039951c3bd0118674ea70a542dd9ecc56f0f1a05848edf3",
    "githooks.html": "2a6eb2a575c49f971cd9e7bd5e08feea6404a81fcdfca5ff6e47ce582b7ce384",
    "git-bisect.html": "ed4f177ecbae35af20c9cbf3d340aa38a2d14f03b3dcbd4809d3d0755ed49a9b",
    "git-blame.html": "82a15cce8e84e541bf88abf79321f15ced541481ed3abc681ad6cd6a834260bc",
    "git-branch.html": "8fa4744ef1cfc322de0fc23a520e71c7db4b9a53ebf6700198a29cf0b2eec6f9",
    "git-checkout.html": "58cfeb2fbe5836992fced3b67cab78ef36810530e828ba7c48083070cdda6130",
    "git-cherry-pick.html": "aad0ff996acff22dd86925a6747f46a69497a2e620b5b04b1ceae9d58dce9894",
    "git-clean.html": "f1d41207d8a653ce1edecdaf2e54879fb3f9e21964fc1d99332415447bbfb0fc",
    "git-commit.html": "9959d2e93dbb12e016e315446a9f9367f91507475acfbe3a47188bea205353f4",
    "git-fetch.html": "f9061ce00f3dc0c03dc63777a452e00c0faf86a08368c96b43a1eef8f870fee6",
    "git-log.html": "b5c3221c2ba19b269226a77782824eb47ab1ef3732e98c0704ab01a70e57f6be",
    "git-merge.html": "b9bce3e4065ee2328e64638c238bd526e3b75347c919ce8baf06ebda871574ee",
    "git-pull.html": "3769ea0a3a28a3bf15ce4cf6098a759ed90de6357e30c7b2fded02a1748664cc",
    "git-push.html": "4cb662621ffede5a058ac986c6aac1a2e90ce22641b20433c65820f8922b3a08",
    "git-rebase.html": "56f993b91569107308b5ef70348fa2b7347732274ced22e469420ea485254da8",
    "git-reflog.html": "801cd06417ed8df4192d1535543aeac424c0fcc3260fa96415822bdf4a1792a0",
    "git-remote.html": "1fb1873948d51ffaf642fbcc6d24d6031811d204bc21a19826a3d5d2569145c2",
    "git-reset.html": "0688b36ae76fa0bb643448e1a9e6275449f9e50efabca1756c9d1afbc2750a44",
    "git-restore.html": "ab702e247ddc3c9d7f947dfcf78bae0267dd4cde43736baa3af3fa4d6dd868b0",
    "git-revert.html": "83f87786d54b8158bf087333d425b31514161e6a91923bc2b7a4af0a416b4f67",
    "git-stash.html": "ba46b3d59953444a98366a8105372b1bc5682cd590a689385cf13954f8bfe100",
    "git-submodule.html": "da473ceb5810759245d2ee58bf194bc2395e954a5220c7b382ce25adc45ff7b5",
    "git-switch.html": "cfffc6ee0cc275e2da9210fd651438aaad8713b4bd9fff66b538df19b85bf9f6",
    "git-tag.html": "2bf2fd7703f2ad9092bddb267ba7d8422791342cae7f1a95e1c3a605f6dd3b71",
    "git-worktree.html": "c8f83494a62b252b3498edf8a85fc94f28ef0f3811cbdd2cdda44978b0eb7487",
}


def build(root: Path, deb: Path) -> int:
    with unpacked_deb(deb, DEB_SHA256, f"get it with `apt-get download git-doc` ({DEB})") as unpacked:
        copy_pinned(PAGES, unpacked / HTML, root / "raw",
                    lambda page: f"{deb.name} has no {HTML / page}: is it Debian's git-doc ({DEB})?")
    return build_located(root, root / "raw", CORPUS, QUESTIONS)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", help="unpack the pages, locate the excerpts, write questions.jsonl")
    build_parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"where to build ({DEFAULT_ROOT})")
    build_parser.add_argument("--deb", type=Path, help=f"Debian's {DEB} (`apt-get download git-doc`)")
    return parser


def main() -> int:
    args = parser().parse_args()
    if args.deb is None:
        print(f"gitdocs: give --deb {DEB}; get it with `apt-get download git-doc` (Debian 12, bookworm; "
              f"sha256 {DEB_SHA256})", file=sys.stderr)
        return 2
    try:
        return build(args.root.expanduser().resolve(), args.deb.expanduser())
    except BenchError as exc:
        print(f"gitdocs: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
