"""Which built-in module defines each built-in component, by registry group and name.

An optimisation only: :meth:`intrabench.registry.Registry.get` imports the one module named
here instead of every module of the built-in package (all the datasets, with pydicom and
requests, for a run that reads a folder: imports before the first forward pass; the figure is
in docs/performance.md). A name missing here is still found by importing
them all, so adding a module is still enough; tests/engine/test_plugins.py checks that this
index matches what the modules register.
"""

BUILTIN_MODULES: dict[str, dict[str, str]] = {
    "intrabench.models": {
        "cvpr25-submission": "intrabench.models.volumetric.cvpr25_submission",
        "litemedsam": "intrabench.models.sam_family.litemedsam",
        "medsam": "intrabench.models.sam_family.medsam",
        "medsam2": "intrabench.models.sam_family.medsam2",
        "mobilesam": "intrabench.models.sam_family.mobilesam",
        "nninteractive": "intrabench.models.volumetric.nninteractive",
        "random-walker-2d": "intrabench.models.classical.random_walker_2d",
        "random-walker-3d": "intrabench.models.classical.random_walker_3d",
        "region-growing-3d": "intrabench.models.classical.region_growing_3d",
        "sam": "intrabench.models.sam_family.sam",
        "sam-med2d": "intrabench.models.sam_family.sam_med2d",
        "sam-med3d": "intrabench.models.volumetric.sam_med3d",
        "sam-med3d-turbo": "intrabench.models.volumetric.sam_med3d",
        "sam2": "intrabench.models.sam_family.sam2",
        "segvol": "intrabench.models.volumetric.segvol",
        "vista3d": "intrabench.models.volumetric.vista3d",
    },
    "intrabench.prompters": {
        "alternating-points-per-slice": "intrabench.prompters.per_slice",
        "box-3d": "intrabench.prompters.volume3d",
        "box-interpolation": "intrabench.prompters.interpolation",
        "box-per-slice": "intrabench.prompters.per_slice",
        "box-per-slice-from-3d-box": "intrabench.prompters.per_slice",
        "box-propagation": "intrabench.prompters.propagation",
        "center-point-per-slice": "intrabench.prompters.per_slice",
        "center-points-per-volume": "intrabench.prompters.volume3d",
        "cvpr25-box": "intrabench.prompters.cvpr25",
        "cvpr25-box-corrected": "intrabench.prompters.cvpr25",
        "lasso": "intrabench.prompters.lasso",
        "point-interpolation": "intrabench.prompters.interpolation",
        "point-propagation": "intrabench.prompters.propagation",
        "points-per-slice": "intrabench.prompters.per_slice",
        "points-per-volume": "intrabench.prompters.volume3d",
        "recorded": "intrabench.prompters.recorded_sessions",
    },
    "intrabench.refiners": {
        "center-error-click": "intrabench.prompters.refiners",
        "corrective-point-per-slice": "intrabench.prompters.refiners",
        "cvpr25-click": "intrabench.prompters.cvpr25",
        "random-corrective-point": "intrabench.prompters.refiners",
        "recorded": "intrabench.prompters.recorded_sessions",
        "scribble": "intrabench.prompters.refiners",
        "scribble-robot": "intrabench.prompters.scribble_robot",
    },
    "intrabench.datasets": {
        "adrenal-acc": "intrabench.datasets.adrenal_acc",
        "colorectal-liver-metastases": "intrabench.datasets.colorectal_liver_metastases",
        "demo-phantoms": "intrabench.datasets.phantoms",
        "demo-real": "intrabench.datasets.nnunet_folder",
        "folder": "intrabench.datasets.folder",
        "hanseg": "intrabench.datasets.hanseg",
        "hcc-tace-lesion": "intrabench.datasets.hcc_tace",
        "hcc-tace-liver": "intrabench.datasets.hcc_tace",
        "hntsmrg": "intrabench.datasets.hntsmrg",
        "lnq": "intrabench.datasets.lnq",
        "ms-lesions": "intrabench.datasets.ms_lesions",
        "nnunet-folder": "intrabench.datasets.nnunet_folder",
        "pengwin": "intrabench.datasets.pengwin",
        "rider-lung": "intrabench.datasets.rider_lung",
        "segrap": "intrabench.datasets.segrap",
    },
    "intrabench.clickability": {
        "contrast-aware": "intrabench.prompters.clickability.contrast",
        "distance": "intrabench.prompters.clickability.distance",
        "network": "intrabench.prompters.clickability.network",
        "recorded": "intrabench.prompters.clickability.recorded",
        "uniform": "intrabench.prompters.clickability.uniform",
    },
}

#: components that left the built-in packages, by registry group and name: the module that
#: registers them now. A config naming one still runs (the registry imports the module, with
#: a DeprecationWarning asking for the config's ``imports:``).
MOVED_OUT: dict[str, dict[str, str]] = {
    "intrabench.models": {
        "synthetic-network": "intrabench.testing.synthetic_network",
        "synthetic-network-2d": "intrabench.testing.synthetic_network",
    },
}
