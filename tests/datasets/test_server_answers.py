"""A server's answer is input: names it sends never become paths outside the dataset's folder,
and malformed answers (wrong types, impossible numbers, deep nesting) are one line, not a
traceback (issue #50 items 1 and 8)."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from intrabench.cli import main
from intrabench.io import download as dl

COLLECTION = "RIDER Lung CT"


def _publish(server, listing) -> None:
    query = urllib.parse.urlencode({"Collection": COLLECTION})
    server.routes[f"/tcia/getSeries?{query}"] = json.dumps(listing).encode()


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.tex").write_text("years of work")
    return victim


def _series(uid, modality="SEG", **more) -> dict:
    return {
        "SeriesInstanceUID": uid,
        "StudyInstanceUID": "1.2",
        "PatientID": "P1",
        "Modality": modality,
        "ImageCount": 1,
        **more,
    }


@pytest.mark.parametrize(
    "uid_of",
    [
        lambda victim: str(victim),  # /abs/victim
        lambda victim: "../../../../" + victim.name,  # ../../../../victim
        lambda victim: "../../../victim",
        lambda victim: "series/../../x",
        lambda victim: "a/b",
        lambda victim: ".hidden",
        lambda victim: "..",
        lambda victim: "",
    ],
)
def test_a_tcia_uid_that_is_a_path_deletes_and_writes_nothing(
    uid_of, http_server, tmp_path, capsys
):
    """The battery's reproduction: a getSeries entry whose SeriesInstanceUID is '/abs/victim'
    or '../../../../victim' made `datasets download rider-lung` rmtree that folder and put the
    DICOM there, exit 0."""
    victim = _victim(tmp_path)
    uid = uid_of(victim)
    _publish(http_server, [_series(uid), _series("1.2.3", "CT")])
    http_server.routes[f"/tcia/getImage?{urllib.parse.urlencode({'SeriesInstanceUID': uid})}"] = (
        b"PK\x05\x06" + b"\0" * 18
    )  # an empty zip: would "succeed"
    root = tmp_path / "data"
    code = main(
        [
            "datasets",
            "download",
            "rider-lung",
            "--root",
            str(root),
            "-q",
            "--tcia-url",
            http_server.url("/tcia"),
        ]
    )
    err = capsys.readouterr().err
    assert code != 0
    assert "is not a safe file name" in err and "Traceback" not in err
    assert (victim / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in victim.iterdir()) == ["thesis.tex"]
    assert not any("getImage" in path for path, _ in http_server.requests)


@pytest.mark.parametrize(
    ("listing", "message"),
    [
        (["1.2.3"], "series entry 0 is a str, not a series description"),
        ([{"Modality": "SEG"}], "series entry 0 has no SeriesInstanceUID"),
        ([_series(123)], "is not a safe file name"),
        ([_series(None)], "is not a safe file name"),
        (
            [_series("1.2", ImageCount="many")],
            "the ImageCount of series entry 0 is 'many', not a whole number",
        ),
        (
            [_series("1.2", ImageCount=-5)],
            "the ImageCount of series entry 0 is -5, a negative number",
        ),
        ([_series("1.2", ImageCount=2.5)], "not a whole number"),
        ([_series("1.2", ImageCount=True)], "not a whole number"),
        ({"series": []}, "unexpected series listing"),
    ],
)
def test_a_malformed_tcia_listing_is_one_line(listing, message, http_server):
    _publish(http_server, listing)
    with pytest.raises(dl.DownloadError, match=message) as error:
        dl.tcia_series(COLLECTION, http_server.url("/tcia"))
    assert "\n" not in str(error.value)


def test_an_image_count_given_as_text_is_read_as_a_number(http_server):
    _publish(http_server, [_series("1.2", ImageCount="12")])
    assert dl.tcia_series(COLLECTION, http_server.url("/tcia"))[0]["ImageCount"] == 12


def test_a_series_listing_on_disk_is_checked_too(tmp_path):
    """raw/series.json is read again by `prepare` and `missing`: a tampered one cannot lead
    out of the dataset's folder either."""
    from intrabench.datasets._recipe import TciaSource, read_series_listing

    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "series.json").write_text(json.dumps([_series("../../victim")]))
    with pytest.raises(dl.DownloadError, match="not a safe file name"):
        TciaSource(COLLECTION).missing(raw)
    (raw / "series.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(Exception, match="cannot be read as a series listing"):
        read_series_listing(raw)


def test_a_series_folder_that_is_a_link_out_is_refused(tmp_path):
    from intrabench.datasets._recipe import series_folder

    raw = tmp_path / "raw"
    (raw / "series").mkdir(parents=True)
    victim = _victim(tmp_path)
    (raw / "series" / "1.2.3").symlink_to(victim)
    with pytest.raises(dl.DownloadError, match="outside"):
        series_folder(raw, "1.2.3")
    assert series_folder(raw, "1.2.4") == raw / "series" / "1.2.4"


def test_a_zenodo_answer_nested_too_deeply_is_one_line(http_server):
    http_server.routes["/api/records/9"] = ("[" * 100000 + "]" * 100000).encode()
    with pytest.raises(dl.DownloadError, match="nested too deeply") as error:
        dl.zenodo_record_files(9, http_server.base)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("length", ["abc", "-5", "1e9"])
def test_a_content_length_that_is_not_a_size_is_one_line(length, http_server, tmp_path):
    http_server.routes["/f.bin"] = b"12345"
    http_server.headers["/f.bin"] = {"Content-Length": length}
    with pytest.raises(dl.DownloadError, match="the Content-Length header is") as error:
        dl.download(http_server.url("/f.bin"), tmp_path / "f.bin", progress=False)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "f.bin").exists()


@pytest.mark.parametrize("name", ["1.2.840.113619.2.55.3", "seg_v2-final+1.dcm", "A" * 200])
def test_ordinary_server_names_are_accepted(name):
    assert dl.server_name(name, "x") == name


@pytest.mark.parametrize("name", ["A" * 201, "a\0b", "a\\b", "c:x", " x", "-x", "a..b"])
def test_odd_server_names_are_refused(name):
    with pytest.raises(dl.DownloadError, match="not a safe file name"):
        dl.server_name(name, "x")
