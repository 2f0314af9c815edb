"""What an installed copy says of its code: the version always, the commit when pip recorded it."""
import importlib.metadata
import json

from soliton_encirclement_ros import provenance


def distribution(tmp_path, direct_url=None):
    """Return an installed distribution in ``tmp_path`` as pip leaves it (PEP 610 if given)."""
    info = tmp_path / 'soliton_encirclement_ros-0.1.0.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text('Metadata-Version: 2.1\nName: soliton_encirclement_ros\n'
                                   'Version: 0.1.0\n')
    if direct_url is not None:
        (info / 'direct_url.json').write_text(json.dumps(direct_url))
    return importlib.metadata.PathDistribution(info)


def test_an_install_from_git_names_its_commit(tmp_path):
    # pip install git+URL@REF records the commit it built: a non-editable install said
    # 'commit unknown' all the same.
    commit = '67684d9' + '0' * 33
    dist = distribution(tmp_path, {'url': 'https://example.org/soliton_encirclement_ros.git',
                                   'vcs_info': {'vcs': 'git', 'commit_id': commit}})
    assert provenance.installed_commit(dist) == commit


def test_an_install_from_a_directory_or_a_wheel_has_no_commit(tmp_path):
    assert provenance.installed_commit(distribution(tmp_path / 'a', {
        'url': 'file:///src/soliton_encirclement_ros', 'dir_info': {}})) == provenance.UNKNOWN
    assert provenance.installed_commit(distribution(tmp_path / 'b')) == provenance.UNKNOWN
