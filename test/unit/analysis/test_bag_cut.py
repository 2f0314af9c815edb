"""
A sqlite3 bag cut short anywhere reads as truncated, in one line, and never as corrupt.

A file cut short of the size its SQLite header states lost its end: where the cut falls (inside
a table page, an index page, the tree that leads to them) decides what SQLite reports, but the
user is told the same thing each time, which row is the last one read and that the rows after
it are lost. Bags written with rosbags' own Writer (support/circle_bag.py).
"""
import os
from pathlib import Path
import re
import shutil

import pytest

from soliton_encirclement_ros.analysis.bag_reader import Bag
from soliton_encirclement_ros.analysis.bag_scan import sqlite_cut_short
from support.circle_bag import write_circle_bag


@pytest.fixture(scope='module')
def whole(tmp_path_factory) -> Path:
    return write_circle_bag(tmp_path_factory.mktemp('cut') / 'bag', storage='sqlite3',
                            agents=4, duration=20.0)


def database(bag: Path) -> Path:
    return next(bag.glob('*.db3'))


def test_a_whole_database_is_not_cut_short(whole):
    assert sqlite_cut_short(database(whole)) is None
    with Bag(whole) as bag:
        assert bag.truncated is None and bag.corrupt is None


def test_a_database_cut_anywhere_says_truncated_after_which_row_and_nothing_corrupt(
        whole, tmp_path):
    size = database(whole).stat().st_size
    page = 4096
    assert size > 64 * page  # enough pages for the tree to have inner pages
    cuts = range(8 * page, size - page, (size - 9 * page) // 40 // page * page + 1234)
    read, lost_before = [], []
    for cut in cuts:
        bag = tmp_path / f'cut_{cut}'
        shutil.copytree(whole, bag)
        os.truncate(database(bag), cut)
        with Bag(bag) as reader:
            assert reader.corrupt is None, (cut, reader.corrupt)
            said = re.fullmatch(
                r'database unreadable after row (\d+) \(bag\.db3 ends at byte (\d+), short of '
                r'the (\d+) bytes its header states\): the rows after it are lost'
                r'(, and (\d+) rows? before it \(ids? [-\d, ]+\))?( \(and its index is '
                r'unreadable: .*\))?', reader.truncated)
            assert said and int(said[2]) == cut and int(said[3]) == size, (cut, reader.truncated)
            read.append(int(said[1]))
            lost_before.append(int(said[5] or 0))
        shutil.rmtree(bag)
    assert len(read) >= 40 and read == sorted(read) and read[0] < read[-1]
    # a page cut part-way keeps its last rows (SQLite fills a page from its end) and loses
    # its first: those few, never more than a page holds, are named in the same line
    assert any(lost_before) and max(lost_before) < 10
