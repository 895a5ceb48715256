"""Reference model definitions that more than one suite shares (the ResNet-50 of MLPerf's
classifier SUT and of the training suite), so neither suite copies the other's.

The bottom floor, beside :mod:`cmx_core.providers`: it imports no other layer. torch is no
cmx-core dependency: each model imports it only when a suite that has torch builds one.
Plugins reach the models through :mod:`cmx_core.api` (``api.resnet50``).
"""
