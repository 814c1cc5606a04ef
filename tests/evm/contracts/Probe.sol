// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.26;

/// A tiny contract for Prism's real-client tests: a stored value (a write with an event), a plain read,
/// and two functions that always revert (a reason string and a custom error), whose revert data must reach
/// the client exactly as the node sent it.
contract Probe {
    uint256 public value;

    event Set(address indexed who, uint256 value);

    error Boom(uint256 code, string why);

    function set(uint256 v) external {
        value = v;
        emit Set(msg.sender, v);
    }

    function fail() external pure {
        revert("prism-test: deliberate revert");
    }

    function failCustom() external pure {
        revert Boom(42, "custom");
    }
}
